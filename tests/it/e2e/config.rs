use serde_json::json;

use super::harness::{Lsp, Workspace};

fn messages(lsp: &mut Lsp, kind: u64) -> Vec<String> {
    lsp.pending_notifications("window/showMessage")
        .into_iter()
        .filter(|m| m["type"] == kind)
        .map(|m| m["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_invalid_initialization_option_is_reported_with_its_key_path() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(
        &ws.root(),
        json!({}),
        Some(json!({ "models": { "fast": { "provider": "opnai", "base_url": "http://127.0.0.1:1/v1", "model": "m" } } })),
    );
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 1);
    let text = shown["message"].as_str().unwrap();
    assert!(
        text.contains("models.fast.provider: unknown provider \"opnai\""),
        "{text}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn an_invalid_change_keeps_the_previous_configuration() {
    let ws = Workspace::new(&[("src/lib.rs", "pub fn visible() {}\n")]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(
        &ws.root(),
        json!({}),
        Some(json!({ "diagnostics": { "debounce_ms": 10 } })),
    );
    // Push-style change with a wrong type: reported, and the old value (diagnostics on) stays.
    lsp.notify(
        "workspace/didChangeConfiguration",
        json!({ "settings": { "fettle": { "diagnostics": { "enabled": "sometimes" } } } }),
    );
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 1);
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("diagnostics.enabled"), "{text}");
    assert!(text.contains("previous configuration"), "{text}");
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", "fn broken( {}\n");
    lsp.diagnostics(&uri, |d| !d.is_empty());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn configuration_is_pulled_from_the_client_and_applied() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    lsp.configuration = json!({ "diagnostics": { "enabled": false } });
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    // Wait until the server has pulled the configuration before opening.
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    assert!(lsp
        .server_requests
        .iter()
        .any(|r| r["method"] == "workspace/configuration"
            && r["params"]["items"][0]["section"] == "fettle"));
    let uri = ws.uri("a.rs");
    lsp.open(&uri, "rust", "fn broken( {}\n");
    // Diagnostics are disabled: what gets published is empty.
    let published = lsp.diagnostics(&uri, |_| true);
    assert!(published.is_empty(), "{published:?}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn unknown_keys_are_warned_about_not_fatal() {
    let ws = Workspace::new(&[("fettle.toml", "[completion]\ndebouce_ms = 5\n")]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 2);
    assert!(
        shown["message"]
            .as_str()
            .unwrap()
            .contains("completion.debouce_ms"),
        "{shown}"
    );
    assert!(messages(&mut lsp, 1).is_empty());
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_broken_workspace_file_is_reported_with_its_location() {
    let ws = Workspace::new(&[("fettle.toml", "[completion\nenabled = true\n")]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    let shown = lsp.notification("window/showMessage", |m| m["type"] == 1);
    let text = shown["message"].as_str().unwrap();
    assert!(text.contains("fettle.toml"), "{text}");
    assert!(lsp.shutdown_and_exit().success());
}

// Reloading configuration files while the server runs (issue 11, point 8).

/// A client that does not watch files for the server (Neovim on Linux).
fn no_file_watching() -> serde_json::Value {
    let mut caps = Lsp::capabilities(&["utf-16"]);
    caps["workspace"]
        .as_object_mut()
        .unwrap()
        .remove("didChangeWatchedFiles");
    caps
}

/// Waits for the `window/showMessage` whose text contains `needle`.
fn message_containing(lsp: &mut Lsp, needle: &str) -> (u64, String) {
    let shown = lsp.notification("window/showMessage", |m| {
        m["message"].as_str().is_some_and(|t| t.contains(needle))
    });
    (
        shown["type"].as_u64().unwrap(),
        shown["message"].as_str().unwrap().to_owned(),
    )
}

/// Diagnostics off is visible: a broken file's published list is empty.
fn diagnostics_are_off(lsp: &mut Lsp, ws: &Workspace, rel: &str) -> bool {
    let uri = ws.uri(rel);
    lsp.open(&uri, "rust", "fn broken( {}\n");
    lsp.diagnostics(&uri, |_| true).is_empty()
}

fn save(lsp: &mut Lsp, ws: &Workspace, rel: &str) {
    lsp.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": ws.uri(rel) } }),
    );
}

#[test]
fn files_changed_outside_the_editor_are_reloaded_without_file_watching() {
    let ws = Workspace::new(&[]);
    let config_home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config_home.path().join("fettle")).unwrap();
    // A home without models: an installed coder model would be the
    // completion model this test expects to see replaced.
    let home = tempfile::tempdir().unwrap();
    let mut lsp = Lsp::spawn_with(
        &[],
        &[
            ("XDG_CONFIG_HOME", config_home.path().to_str().unwrap()),
            ("HOME", home.path().to_str().unwrap()),
        ],
    );
    lsp.initialize(&ws.root(), no_file_watching(), None);
    // The watch is set up before indexing starts.
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    assert!(!lsp
        .server_requests
        .iter()
        .any(|r| r["method"] == "client/registerCapability"
            && r.to_string().contains("didChangeWatchedFiles")));

    ws.write("fettle.toml", "[diagnostics]\nenabled = false\n");
    let (kind, text) = message_containing(&mut lsp, "reloaded");
    assert_eq!(kind, 3, "{text}");
    assert_eq!(
        text,
        "fettle: fettle.toml reloaded: diagnostics.enabled true → false"
    );
    assert!(diagnostics_are_off(&mut lsp, &ws, "a.rs"));

    // The user's own file is watched too.
    std::fs::write(
        config_home.path().join("fettle/config.toml"),
        "[completion]\nmodel = \"fast\"\n[models.fast]\nprovider = \"ollama\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let (_, text) = message_containing(&mut lsp, "config.toml reloaded");
    assert!(text.contains("completion.model local → fast"), "{text}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn saving_fettle_toml_in_the_editor_reloads_it() {
    let ws = Workspace::new(&[]);
    let mut lsp = Lsp::spawn();
    // This client watches files, but sends no watched-file event here: the save alone must do.
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    ws.write("fettle.toml", "[diagnostics]\nenabled = false\n");
    save(&mut lsp, &ws, "fettle.toml");
    let (kind, text) = message_containing(&mut lsp, "reloaded");
    assert_eq!(kind, 3, "{text}");
    assert!(text.contains("diagnostics.enabled true → false"), "{text}");
    assert!(diagnostics_are_off(&mut lsp, &ws, "a.rs"));
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_broken_reload_is_reported_and_the_previous_configuration_stays() {
    let ws = Workspace::new(&[("fettle.toml", "[diagnostics]\nenabled = false\n")]);
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), no_file_watching(), None);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    ws.write("fettle.toml", "[diagnostics]\nenabled = \n");
    save(&mut lsp, &ws, "fettle.toml");
    let (kind, text) = message_containing(&mut lsp, "invalid configuration");
    assert_eq!(kind, 1, "{text}");
    assert!(text.contains("fettle.toml:2:"), "{text}");
    assert!(text.contains("previous configuration"), "{text}");
    // Still off: the last valid contents stay in force.
    assert!(diagnostics_are_off(&mut lsp, &ws, "a.rs"));
    // A valid value that does not fit is refused the same way.
    ws.write("fettle.toml", "[diagnostics]\nenabled = \"sometimes\"\n");
    save(&mut lsp, &ws, "fettle.toml");
    let (kind, text) = message_containing(&mut lsp, "diagnostics.enabled");
    assert_eq!(kind, 1, "{text}");
    assert!(diagnostics_are_off(&mut lsp, &ws, "b.rs"));
    assert!(lsp.shutdown_and_exit().success());
}
