//! Mistral: the OpenAI wire (`openai.rs`) with fill-in-the-middle at
//! Codestral's `/fim/completions` (prompt and suffix sent apart, the server
//! lays them out; the stream is chat-shaped), chat at `/chat/completions`
//! (tool calls included).
use super::openai::Dialect;
use crate::config::Provider as ProviderKind;

pub(crate) const MISTRAL: Dialect = Dialect {
    provider: ProviderKind::Mistral,
    fim_path: "/fim/completions",
    // Mistral reports usage in its last chunk unasked, and `stream_options`
    // is not part of its API, so it is not sent.
    include_usage: false,
    lays_out_fim: true,
};
