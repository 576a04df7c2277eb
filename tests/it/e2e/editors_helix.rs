//! `editors/helix/`: the languages.toml and keymap files users copy. They
//! parse, add Fettle beside each language's own server without shadowing
//! it, give it a timeout longer than a task, and every key's command,
//! sent the way Helix sends it (`:lsp-workspace-command NAME`: no
//! arguments), is one the real server advertises and answers.
use std::path::PathBuf;

use serde_json::{json, Value};

use super::harness::{BackgroundMock, Lsp, Workspace};

/// Helix's names for the LSP features a server can be limited to.
const HELIX_FEATURES: &[&str] = &[
    "format",
    "goto-definition",
    "goto-declaration",
    "goto-type-definition",
    "goto-reference",
    "goto-implementation",
    "signature-help",
    "hover",
    "document-highlight",
    "completion",
    "code-action",
    "workspace-command",
    "document-symbols",
    "workspace-symbols",
    "diagnostics",
    "rename-symbol",
    "inlay-hints",
    "document-colors",
];

fn read(name: &str) -> toml::Table {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("editors/helix")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    text.parse::<toml::Table>()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn helix_languages_toml_adds_fettle_beside_each_server() {
    let languages = read("languages.toml");
    let server = &languages["language-server"]["fettle"];
    assert_eq!(server["command"].as_str(), Some("fettle"));
    // Longer than a whole task (agent.timeout_s, 900 s by default): the
    // command's request is answered when the task ends.
    let timeout = server["timeout"].as_integer().unwrap();
    assert!(timeout > 900, "timeout {timeout}");
    let entries = languages["language"].as_array().unwrap();
    assert!(entries.len() >= 3, "{entries:?}");
    for language in entries {
        let name = language["name"].as_str().unwrap();
        let servers = language["language-servers"].as_array().unwrap();
        // The language's own server first, so it keeps hover, goto, ...
        assert!(
            servers[0].as_str().is_some_and(|s| s != "fettle"),
            "{name}: {servers:?}"
        );
        let fettle: Vec<&toml::Value> = servers
            .iter()
            .filter(|s| s.get("name").and_then(toml::Value::as_str) == Some("fettle"))
            .collect();
        assert_eq!(fettle.len(), 1, "{name}: {servers:?}");
        let only: Vec<&str> = fettle[0]["only-features"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: fettle without only-features"))
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        for feature in &only {
            assert!(
                HELIX_FEATURES.contains(feature),
                "{name}: unknown feature {feature}"
            );
        }
        for wanted in ["code-action", "workspace-command", "diagnostics"] {
            assert!(only.contains(&wanted), "{name}: {only:?}");
        }
        for theirs in ["hover", "goto-definition", "format", "rename-symbol"] {
            assert!(!only.contains(&theirs), "{name} shadows {theirs}: {only:?}");
        }
    }
}

/// The keymap commands and the settings, against the real server: Helix
/// sends `initializationOptions` = the server's `config` table and
/// `workspace/executeCommand` without `arguments`.
#[test]
fn helix_keys_run_commands_the_server_answers() {
    let languages = read("languages.toml");
    let keys = read("config.toml");
    let settings: Value =
        serde_json::to_value(&languages["language-server"]["fettle"]["config"]).unwrap();
    let mut commands = Vec::new();
    for (mode, table) in keys["keys"].as_table().unwrap() {
        for (key, action) in table["space"][","].as_table().unwrap() {
            let action = action.as_str().unwrap();
            if let Some(command) = action.strip_prefix(":lsp-workspace-command ") {
                commands.push(command.to_owned());
            } else {
                assert_eq!(action, "code_action", "{mode} space , {key}");
            }
        }
    }
    assert_eq!(commands.len(), 3, "{commands:?}");

    let mut answer = fettle::mock::ScriptedResponse::text("items if items else []");
    answer.repeat = true;
    let mock = BackgroundMock::start(fettle::mock::Script::new(vec![answer]));
    let mut options = settings.clone();
    options["models"] = json!({ "mock": {
        "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
        "model": "starcoder2-3b", "fim_template": "starcoder", "max_retries": 0 } });
    for role in ["completion", "edit", "agent"] {
        options[role]["model"] = json!("mock");
    }
    let ws = Workspace::new(&[("shop.py", "def total(items):\n    return \n")]);
    let mut lsp = Lsp::spawn();
    let init = lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-8"]), Some(options));
    let advertised = init["capabilities"]["executeCommandProvider"]["commands"].clone();
    let uri = ws.uri("shop.py");
    lsp.open(&uri, "python", "def total(items):\n    return \n");
    for command in &commands {
        assert!(
            advertised
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == command.as_str()),
            "{command} not in {advertised}"
        );
        // Exactly what Helix sends: no `arguments`.
        let result = lsp.request("workspace/executeCommand", json!({ "command": command }));
        match result {
            Ok(_) => {}
            // Nothing ran before it here: a precise refusal, not a
            // complaint about the missing arguments.
            Err(err) if command == "fettle.undo" => {
                assert!(
                    err["message"].as_str().unwrap().contains("no task to undo"),
                    "{err}"
                )
            }
            Err(err) => panic!("{command}: {err}"),
        }
    }
    // `as_completion_item = true` from the settings: Fettle's suggestion
    // is a completion menu item, Helix's only way to show it.
    let items = lsp
        .request(
            "textDocument/completion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 1, "character": 11 },
                    "context": { "triggerKind": 1 } }),
        )
        .unwrap();
    let items = items.get("items").unwrap_or(&items).clone();
    assert!(
        items
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["textEdit"]["newText"]
                .as_str()
                .is_some_and(|t| t.contains("items if items else []"))),
        "{items:#}"
    );
}
