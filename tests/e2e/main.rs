//! End-to-end tests: the real `fettle` binary over real stdio framing.

mod harness;

mod config;
mod diagnostics;
mod lifecycle;
mod neovim;
mod robustness;
mod symbols;
mod workspace;
