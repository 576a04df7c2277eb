//! The agent's view of [`crate::secrets`]: secret files and the redactor
//! (kept under this name for the agent's modules and tests).
pub use crate::secrets::{env_secret_values, is_secret_path, Redactor};
