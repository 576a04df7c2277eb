//! Secrets never reach a model. Shared by the agent and completion (neither
//! depends on the other):
//!
//! * [`store`]: Fettle's own secret environment variables (API keys), moved
//!   out of the process environment at start-up so commands cannot read
//!   them, and read by providers from there;
//! * [`is_secret_path`]: the files that are never read (agent tools, search)
//!   and never feed completion context;
//! * [`Redactor`]: every text bound for a model passes through it — known
//!   secret values (workspace dotenv files, the store) in plain and encoded
//!   forms, and secret shapes (key material, token formats).
mod paths;
pub mod redact;
pub mod store;

pub use paths::is_secret_path;
pub use redact::{env_secret_values, Redactor};
