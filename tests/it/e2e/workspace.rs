use serde_json::{json, Value};

use super::harness::{redact, Lsp, Workspace};

fn names(result: &Value) -> Vec<String> {
    result
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

fn project() -> Workspace {
    Workspace::new(&[
        (".gitignore", "target/\n"),
        (
            "src/lib.rs",
            "/* 😀 */ pub fn parse_config() {}\npub struct ConfigLoader;\n",
        ),
        (
            "src/util.py",
            "class HttpClient:\n    def send_request(self):\n        pass\n",
        ),
        (
            "web/app.ts",
            "export function renderPage(): void {}\nexport interface PageProps { title: string }\n",
        ),
        ("target/generated.rs", "pub fn ignored_by_gitignore() {}\n"),
    ])
}

#[test]
fn workspace_symbol_answers_from_the_background_index() {
    let ws = project();
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let result = lsp
        .request("workspace/symbol", json!({ "query": "parcon" }))
        .unwrap();
    // UTF-16: `/* 😀 */ pub fn ` is 16 units, so the name starts at character 16.
    insta::assert_json_snapshot!(redact(&result, &ws.root()));
    let all = lsp
        .request("workspace/symbol", json!({ "query": "" }))
        .unwrap();
    let all = names(&all);
    // An empty query lists top-level symbols; nested ones need a query.
    for expected in [
        "parse_config",
        "ConfigLoader",
        "HttpClient",
        "renderPage",
        "PageProps",
    ] {
        assert!(
            all.iter().any(|n| n == expected),
            "{expected} missing from {all:?}"
        );
    }
    let nested = lsp
        .request("workspace/symbol", json!({ "query": "sendreq" }))
        .unwrap();
    assert_eq!(nested[0]["name"], "send_request", "{nested}");
    assert_eq!(nested[0]["containerName"], "HttpClient", "{nested}");
    assert!(
        !all.iter().any(|n| n == "ignored_by_gitignore"),
        "gitignored file was indexed: {all:?}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn indexing_reports_progress_to_clients_that_support_it() {
    let ws = project();
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    let end = lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    assert!(
        end["value"]["message"]
            .as_str()
            .unwrap()
            .contains("indexed"),
        "{end}"
    );
    let token = end["token"].clone();
    assert!(
        lsp.server_requests
            .iter()
            .any(|r| r["method"] == "window/workDoneProgress/create"
                && r["params"]["token"] == token),
        "progress token was not created first"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn watched_file_changes_keep_the_index_current() {
    let ws = project();
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    assert!(
        lsp.server_requests
            .iter()
            .any(|r| r["method"] == "client/registerCapability"
                && r["params"]["registrations"]
                    .to_string()
                    .contains("workspace/didChangeWatchedFiles")),
        "file watching was not registered"
    );

    ws.write("src/fresh.rs", "pub fn brand_new_function() {}\n");
    lsp.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [ { "uri": ws.uri("src/fresh.rs"), "type": 1 } ] }),
    );
    lsp.poll(
        "workspace/symbol",
        json!({ "query": "brand_new_function" }),
        |r| names(r) == ["brand_new_function"],
    );

    std::fs::remove_file(ws.path("src/fresh.rs")).unwrap();
    lsp.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [ { "uri": ws.uri("src/fresh.rs"), "type": 3 } ] }),
    );
    lsp.poll(
        "workspace/symbol",
        json!({ "query": "brand_new_function" }),
        |r| names(r).is_empty(),
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn unsaved_buffer_edits_reach_the_index_and_closing_reverts_to_disk() {
    let ws = project();
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = ws.uri("src/lib.rs");
    lsp.open(
        &uri,
        "rust",
        "/* 😀 */ pub fn parse_config() {}\npub struct ConfigLoader;\n",
    );
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [
            { "range": { "start": { "line": 2, "character": 0 }, "end": { "line": 2, "character": 0 } }, "text": "pub fn only_in_buffer() {}\n" } ] }),
    );
    lsp.poll(
        "workspace/symbol",
        json!({ "query": "only_in_buffer" }),
        |r| names(r) == ["only_in_buffer"],
    );
    lsp.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": uri } }),
    );
    lsp.poll(
        "workspace/symbol",
        json!({ "query": "only_in_buffer" }),
        |r| names(r).is_empty(),
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn saving_a_closed_file_reindexes_it() {
    let ws = project();
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), json!({}), None);
    lsp.poll("workspace/symbol", json!({ "query": "HttpClient" }), |r| {
        !names(r).is_empty()
    });
    ws.write("src/util.py", "class RenamedClient:\n    pass\n");
    lsp.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": ws.uri("src/util.py") } }),
    );
    lsp.poll(
        "workspace/symbol",
        json!({ "query": "RenamedClient" }),
        |r| names(r) == ["RenamedClient"],
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn watched_file_events_apply_in_arrival_order() {
    let ws = project();
    let mut lsp = Lsp::spawn();
    lsp.initialize(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    // A file saved by "delete + create" (as some editors and tools do): the
    // last event wins, so the symbol must be there in every round.
    for round in 0..20 {
        let name = format!("rewritten_{round}");
        ws.write("src/lib.rs", &format!("pub fn {name}() {{}}\n"));
        let uri = ws.uri("src/lib.rs");
        lsp.notify(
            "workspace/didChangeWatchedFiles",
            json!({ "changes": [ { "uri": uri, "type": 3 } ] }),
        );
        lsp.notify(
            "workspace/didChangeWatchedFiles",
            json!({ "changes": [ { "uri": uri, "type": 1 } ] }),
        );
        lsp.poll("workspace/symbol", json!({ "query": name }), |r| {
            names(r) == [name.as_str()]
        });
        // And it stays: no late "deleted" overtakes the "created".
        std::thread::sleep(std::time::Duration::from_millis(30));
        let again = lsp
            .request("workspace/symbol", json!({ "query": name }))
            .unwrap();
        assert_eq!(names(&again), [name.as_str()], "round {round}");
    }
    assert!(lsp.shutdown_and_exit().success());
}
