//! The completion-menu fallback for clients without inline completion.

use super::*;

#[test]
fn clients_without_inline_completion_can_get_a_menu_item() {
    let mock = Mock::start(vec![ScriptedResponse::text("p.x * p.y;\n")]);
    let ws = workspace();
    let mut options = mock.options();
    options["completion"]["as_completion_item"] = json!(true);
    let (mut lsp, init) =
        Lsp::initialized(&ws.root(), Lsp::capabilities(&["utf-16"]), Some(options));
    assert!(
        init["capabilities"]["completionProvider"].is_object(),
        "{init}"
    );
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", LIB);
    let result = lsp
        .request(
            "textDocument/completion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } }),
        )
        .unwrap();
    let item = &result[0];
    assert_eq!(item["label"], "p.x * p.y;", "{result}");
    assert_eq!(item["textEdit"]["newText"], "p.x * p.y;");
    assert_eq!(item["insertTextFormat"], 1);
    assert_eq!(item["command"]["command"], "fettle.acceptCompletion");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn the_menu_item_fallback_is_off_by_default() {
    let ws = workspace();
    let (lsp, init) = Lsp::initialized(&ws.root(), Lsp::capabilities(&["utf-16"]), None);
    assert!(
        init["capabilities"]["completionProvider"].is_null(),
        "{init}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_selected_menu_item_is_extended_over_its_range() {
    let mock = Mock::start(vec![ScriptedResponse::text("(p.x);\n")]);
    let text = "fn area(p: &Point) -> f64 {\n    let w = f64::ab\n    w\n}\n";
    let (_ws, mut lsp, uri) = open_alone(
        "src/lib.rs",
        text,
        Lsp::capabilities(&["utf-16"]),
        mock.options(),
    );
    // The client's menu has `abs` selected for the typed `ab` (columns 17..19).
    let selected =
        json!({ "start": { "line": 1, "character": 17 }, "end": { "line": 1, "character": 19 } });
    let result = lsp
        .request(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 1, "character": 19 },
                    "context": { "triggerKind": 2, "selectedCompletionInfo": { "range": selected, "text": "abs" } } }),
        )
        .unwrap();
    assert_eq!(result["items"][0]["insertText"], "abs(p.x);", "{result}");
    assert_eq!(result["items"][0]["range"], selected);
    // The model saw the selection as typed.
    assert!(
        mock.prompts()[0].contains("let w = f64::abs<fim_suffix>"),
        "{}",
        mock.prompts()[0]
    );
    assert!(lsp.shutdown_and_exit().success());
}

/// The menu item for a client with snippet support: escaped snippet text
/// that starts with the word being typed (its range starts there, in the
/// negotiated encoding), without the closers it re-types (left in place:
/// the edit ends at the cursor), whole first line as label and filter.
#[test]
fn the_menu_item_starts_at_the_typed_word_and_ends_at_the_cursor() {
    let text = "fn f(p: &Point) -> f64 {\n    let z = \"😀\"; let y = are\n    let w = max()\n}\n";
    let mock = Mock::start(vec![
        ScriptedResponse::text("a(p) + ${1};"),
        ScriptedResponse::text("p.x, p.y)"),
    ]);
    let mut options = mock.options();
    options["completion"]["as_completion_item"] = json!(true);
    let mut capabilities = Lsp::capabilities(&["utf-16"]);
    capabilities["textDocument"]["completion"] =
        json!({ "completionItem": { "snippetSupport": true } });
    let (_ws, mut lsp, uri) = open_alone("src/lib.rs", text, capabilities, options);
    let menu = |lsp: &mut Lsp, line: u32, character: u32| {
        lsp.request(
            "textDocument/completion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } }),
        )
        .unwrap()
    };
    // `    let z = "😀"; let y = are`: 29 UTF-16 units, `are` starts at 26.
    let result = menu(&mut lsp, 1, 29);
    let item = &result[0];
    assert_eq!(
        item["textEdit"]["newText"], r"area(p) + \${1\};",
        "{result}"
    );
    assert_eq!(
        item["textEdit"]["range"],
        json!({ "start": { "line": 1, "character": 26 }, "end": { "line": 1, "character": 29 } })
    );
    assert_eq!(item["label"], "area(p) + ${1};");
    assert_eq!(item["filterText"], "area(p) + ${1};");
    assert_eq!(
        (&item["insertTextFormat"], &item["insertTextMode"]),
        (&json!(2), &json!(2))
    );
    assert_eq!(item["command"]["command"], "fettle.acceptCompletion");
    // `max(█)` + `p.x, p.y)`: the `)` stays, the edit ends at the cursor.
    let result = menu(&mut lsp, 2, 16);
    let item = &result[0];
    assert_eq!(item["textEdit"]["newText"], "p.x, p.y", "{result}");
    assert_eq!(
        item["textEdit"]["range"],
        json!({ "start": { "line": 2, "character": 16 }, "end": { "line": 2, "character": 16 } })
    );
    assert!(lsp.shutdown_and_exit().success());
}
