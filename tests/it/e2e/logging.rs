//! Editors record a server's stderr as errors (Neovim's `lsp.log` marks
//! every line `[ERROR]`): by default `fettle` logs warnings only;
//! `FETTLE_LOG` or `log.level` still turn on the rest.
use std::time::Duration;

use serde_json::json;

use super::harness::{Lsp, Workspace};

/// A short session that does what logs at INFO: initialize, index, open, exit.
fn session(mut lsp: Lsp, options: Option<serde_json::Value>) -> String {
    let ws = Workspace::new(&[("src/lib.rs", "pub fn visible() {}\n")]);
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), options);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", "pub fn visible() {}\n");
    lsp.pump_for(Duration::from_millis(200));
    let stderr_before_exit = lsp.stderr();
    assert!(lsp.shutdown_and_exit().success());
    stderr_before_exit
}

fn info_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(" INFO ")).collect()
}

#[test]
fn serve_logs_no_info_by_default() {
    let lsp = Lsp::spawn_removing(&[], &[], &["FETTLE_LOG"]);
    let stderr = session(lsp, None);
    assert!(info_lines(&stderr).is_empty(), "{stderr}");
}

#[test]
fn fettle_log_or_log_level_still_turn_info_on() {
    let lsp = Lsp::spawn_with(&[], &[("FETTLE_LOG", "info")]);
    let stderr = session(lsp, None);
    assert!(!info_lines(&stderr).is_empty(), "{stderr}");

    let lsp = Lsp::spawn_removing(&[], &[], &["FETTLE_LOG"]);
    let stderr = session(lsp, Some(json!({ "log": { "level": "info" } })));
    // Once: `initialized` applies the same settings again, which is not news.
    assert_eq!(
        info_lines(&stderr)
            .iter()
            .filter(|l| l.contains("configuration applied"))
            .count(),
        1,
        "{stderr}"
    );
}
