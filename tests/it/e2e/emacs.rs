//! `editors/emacs/fettle.el` in a real Emacs (Debian's emacs-nox with
//! elpa-eglot, batch mode): its ERT tests (tests/fixtures/emacs) drive the
//! real server and the mock model: ghost text, rewrite, chat, the log,
//! the diff and undo.
use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

use super::harness::{BackgroundMock, Workspace};

const SHOP: &str = "def total(items):\n    return sum(i.price for i in items)\n\n\ndef describe(item):\n    label = \"🛒 \" + \n";
const CALC: &str = "def add(a, b):\n    return a + b\n";
const MODELS: &str = "class Invoice:\n    def __init__(self, amount):\n        self.amount = amount\n\n    def total(self):\n        return self.amount - 1\n";
const CHECK: &str = "from models import Invoice\nassert Invoice(5).total() == 5\n";

fn emacs() -> Option<PathBuf> {
    let found = Command::new("emacs").arg("--version").output().ok()?;
    found.status.success().then(|| PathBuf::from("emacs"))
}

fn script() -> fettle::mock::Script {
    let fim = |prefix_end: &str, text: &str| {
        json!({ "when": { "path": "/v1/completions", "contains": format!("{prefix_end}<fim_suffix>") },
                "text": text, "repeat": true })
    };
    let agent = |step: serde_json::Value| {
        let mut step = step;
        step["when"] = json!({ "path": "/v1/chat/completions", "contains": "make check.py pass" });
        step
    };
    let responses = json!([
        fim("+ it", "em.name.upper()"),
        fim("total = tot", "al([item])"),
        // Typing gets one suggestion; M-n asks for alternatives (fettle-4).
        json!({ "when": { "path": "/v1/completions", "contains": "count = cou<fim_suffix>" },
                "text": "nt + 1" }),
        fim("count = cou", "nt * 2"),
        { "when": { "path": "/v1/chat/completions", "contains": "Add a docstring" },
          "text": "```python\ndef add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n    return a + b\n```",
          "repeat": true },
        agent(json!({ "tool_calls": [{ "name": "read_file", "arguments": { "path": "models.py" } }] })),
        agent(json!({ "tool_calls": [{ "name": "edit", "arguments": {
            "path": "models.py", "search": "        return self.amount - 1\n",
            "replace": "        return self.amount\n" } }] })),
        agent(json!({ "text": "Fixed `total`." })),
        // The follow-up (fettle-3): its request quotes the first one.
        agent(json!({ "tool_calls": [{ "name": "read_file", "arguments": { "path": "models.py" } }] })),
        agent(json!({ "tool_calls": [{ "name": "edit", "arguments": {
            "path": "models.py", "search": "        return self.amount - 1\n",
            "replace": "        return self.amount\n" } }] })),
        agent(json!({ "text": "Fixed it again." })),
        { "text": "", "repeat": true },
    ]);
    fettle::mock::Script::from_json(&json!({ "responses": responses }).to_string()).unwrap()
}

#[test]
fn emacs_fettle_el_ert_suite_passes() {
    let Some(emacs) = emacs() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_EMACS").is_none(),
            "FETTLE_REQUIRE_EMACS is set but Emacs was not found"
        );
        eprintln!("skipping: Emacs not found (apt-get install emacs-nox elpa-eglot)");
        return;
    };
    let ws = Workspace::new(&[
        ("shop.py", SHOP),
        ("calc.py", CALC),
        ("models.py", MODELS),
        ("check.py", CHECK),
    ]);
    let mock = BackgroundMock::start(script());
    let init = json!({
        "models": { "mock": {
            "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
            "model": "starcoder2-3b", "fim_template": "starcoder", "max_retries": 0,
        } },
        "completion": { "model": "mock", "debounce_ms": 0 },
        "edit": { "model": "mock" },
        "agent": { "model": "mock", "test_command": "python3 check.py" },
    });
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(emacs)
        .args(["--batch", "-q", "-l"])
        .arg(manifest.join("tests/fixtures/emacs/fettle-test.el"))
        .args(["-f", "ert-run-tests-batch-and-exit"])
        .current_dir(ws.root())
        .stdin(std::process::Stdio::null())
        .env("HOME", home.path())
        .env("FETTLE_BIN", env!("CARGO_BIN_EXE_fettle"))
        .env("FETTLE_ROOT", ws.root())
        .env("FETTLE_PLUGIN", manifest.join("editors/emacs"))
        .env("FETTLE_INIT", init.to_string())
        .env("FETTLE_CACHE_DIR", ws.root().join(".cache"))
        .env("XDG_CONFIG_HOME", ws.root().join(".no-config"))
        .output()
        .expect("run emacs");
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    assert!(
        report.contains("Ran 5 tests, 5 results as expected"),
        "{report}"
    );
    // The agent's edit reached the file and `fettle-undo` restored it.
    assert_eq!(
        std::fs::read_to_string(ws.path("models.py")).unwrap(),
        MODELS
    );
}

/// fettle.el and fettle-ghost.el byte-compile without a warning (free
/// variables, wrong arities and obsolete calls are warnings), each on its
/// own (the other found on the load path, as a user's setup has it).
#[test]
fn emacs_fettle_el_compiles_cleanly() {
    let Some(emacs) = emacs() else {
        assert!(std::env::var_os("FETTLE_REQUIRE_EMACS").is_none());
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plugin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("editors/emacs");
    let files = ["fettle.el", "fettle-ghost.el"];
    for file in files {
        std::fs::copy(plugin.join(file), dir.path().join(file)).unwrap();
    }
    for file in files {
        let output = Command::new(&emacs)
            .args(["--batch", "-q", "-L"])
            .arg(dir.path())
            .arg("--eval")
            .arg(format!(
                "(progn (setq byte-compile-error-on-warn t) (kill-emacs (if (byte-compile-file {:?}) 0 1)))",
                dir.path().join(file).display().to_string()
            ))
            .env("HOME", dir.path())
            .output()
            .expect("run emacs");
        assert!(
            output.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // Every file of the plugin is compiled here.
    let mut found: Vec<String> = std::fs::read_dir(&plugin)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".el"))
        .collect();
    found.sort();
    assert_eq!(found, ["fettle-ghost.el", "fettle.el"]);
}
