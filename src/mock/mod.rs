//! A scriptable mock model server for tests and development.
//!
//! [`MockServer`] is a real HTTP server on 127.0.0.1 that speaks the wire
//! formats of the remote providers (OpenAI chat and completions, Anthropic
//! Messages, Ollama, Mistral FIM, llama.cpp server), streaming and not. It
//! answers from a [`Script`]: an ordered list of [`ScriptedResponse`]s, each
//! optionally matched on the request path or body, carrying the text, tool
//! calls, usage, delays and an optional [`Fault`] (HTTP errors, dropped
//! connections, truncated or malformed streams, hangs). Every request is
//! recorded for assertions ([`MockServer::requests`]).
//!
//! The script format and the endpoints are documented in
//! `docs/mock-model-server.md`.
mod cli;
mod formats;
mod respond;
mod script;
mod server;

pub use cli::run_cli;
pub use script::{split_words, Fault, Matcher, MockToolCall, MockUsage, Script, ScriptedResponse};
pub use server::{MockServer, RecordedRequest};
