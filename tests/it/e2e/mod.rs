//! End-to-end tests: the real `fettle` binary over real stdio framing.
// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub(crate) mod harness;

mod hostile_repo;

mod agent;
mod agent_buffers;
mod agent_trace;
mod arguments;
mod bounded_outputs;
mod checks;
mod config;
mod diagnostics;
mod editors_helix;
mod emacs;
mod huge_inputs;
mod inline_completion;
mod lifecycle;
mod logging;
mod model_install;
mod models;
mod neovim;
mod neovim_ghost;
mod prompt_ahead;
mod rewrite;
mod robustness;
mod robustness_eof;
mod robustness_framing;
mod symbols;
mod trust;
mod warm_ahead;
mod workspace;
