//! Neovim accepting the completion menu's item (the fallback for clients without inline completion).

use super::*;

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
    let mock =
        crate::e2e::harness::BackgroundMock::start(fettle::mock::Script::new(vec![response]));
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

/// The case: Neovim kept only the first word of the item (`0`).
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
