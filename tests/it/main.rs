//! Fettle's integration tests, as one binary: one link of the library (and
//! llama.cpp) instead of one per file. Each module is what used to be its
//! own test binary; `e2e` drives the real `fettle` binary over stdio.
//!
//! Tests here share one process: a test that must change the process
//! environment (HOME, cache directories) runs itself in a child process
//! (`isolated::alone!`) instead.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared helpers.
mod agent_common;
mod index_common;
mod isolated;
mod openai_compat_common;
mod providers_anthropic_ollama_common;
mod reference;

mod agent_bisect;
mod agent_checkpoint;
mod agent_confined;
mod agent_conversation;
mod agent_corpus;
mod agent_coverage;
mod agent_edit;
mod agent_exec;
mod agent_paths;
mod agent_redact;
mod agent_repo_map;
mod agent_sandbox;
mod agent_scenarios;
mod agent_search;
mod agent_secrets;
mod agent_undo_hostile;
mod agent_verify;
mod architecture;
mod check_cli;
mod checkers;
mod cli;
mod completion_context;
mod completion_postprocess;
mod completion_trigger;
mod config;
mod config_messages;
mod config_trust;
mod doctor_models;
mod document_props;
mod e2e;
mod edit_engine;
mod fim_templates;
mod hostile_files;
mod index;
mod index_search;
mod install_script;
mod local_model;
mod mock_server;
mod model_fetch;
mod positions;
mod prompt_delimiting;
mod provider_anthropic;
mod provider_llamacpp;
mod provider_mistral;
mod provider_ollama;
mod provider_openai;
mod secrets_redact;
mod syntax_errors;
mod syntax_parse;
mod syntax_perf;
mod syntax_symbol_tree;
mod syntax_symbols;
mod token_budget;
mod trust_cli;
