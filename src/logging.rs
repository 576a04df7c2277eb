//! Logging goes to stderr through `tracing`: stdout is the LSP stream.
