//! The remote providers, one module per wire format.
pub(crate) mod anthropic;
pub(crate) mod llamacpp;
pub(crate) mod mistral;
pub(crate) mod ollama;
pub(crate) mod openai;
pub(crate) mod openai_wire;
mod stream;
