//! Secrets never reach the completion prompt.

use super::*;

/// Generated, so nothing secret-looking is committed.
fn fake_value(tag: &str) -> String {
    format!("{tag}-{}", "q7Zr4kW9xP2mN8vB5tY3".repeat(2))
}

fn base64_of(text: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..=c.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[test]
fn secret_files_never_feed_the_completion_prompt_and_it_is_redacted() {
    let on_disk = fake_value("sk-disk");
    let typed = fake_value("tok-typed");
    let mock = Mock::start(vec![ScriptedResponse::text("p.x * p.y;\n")]);
    let env_text = format!("API_KEY={on_disk}\nDEBUG=true\n");
    let ws = Workspace::new(&[
        ("src/lib.rs", LIB),
        (
            "src/geometry.rs",
            "pub struct Point {\n    pub x: f64,\n    pub y: f64,\n}\n",
        ),
        (".env", &env_text),
    ]);
    let mut lsp = session(&ws, Some(mock.options()));
    // `.env` open and edited (the new value is not on disk), most recently.
    let geometry = ws.uri("src/geometry.rs");
    let text = std::fs::read_to_string(ws.path("src/geometry.rs")).unwrap();
    lsp.open(&geometry, "rust", &text);
    // A value pasted into code, in another open file (a recent edit).
    insert(
        &mut lsp,
        &geometry,
        2,
        (4, 0),
        &format!(
            "\npub fn point_area(p: &Point) -> f64 {{\n    let k = \"{on_disk}\";\n    0.0\n}}\n"
        ),
    );
    let env = ws.uri(".env");
    lsp.open(&env, "dotenv", &env_text);
    insert(&mut lsp, &env, 2, (2, 0), &format!("NEW_TOKEN={typed}\n"));
    // The typed value, base64-encoded, in the prefix of the file completed.
    let lib = format!("// {}\n{LIB}", base64_of(&format!("x{typed}")));
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", &lib);
    let result = complete(&mut lsp, &uri, 4, 12);
    assert_eq!(result["items"][0]["insertText"], "p.x * p.y;", "{result}");
    let bodies: Vec<String> = mock
        .server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(bodies.len(), 1);
    let body = &bodies[0];
    assert!(
        body.contains("point_area"),
        "the edit should be offered: {body}"
    );
    for leak in [
        on_disk.as_str(),
        typed.as_str(),
        "API_KEY=",
        "NEW_TOKEN=",
        &base64_of(&typed)[..20],
        &base64_of(&format!("x{typed}"))[4..24],
    ] {
        assert!(!body.contains(leak), "{leak:?} reached the model: {body}");
    }
    assert!(body.contains("[REDACTED"), "{body}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn no_completion_inside_a_secret_file() {
    let mock = Mock::start(vec![ScriptedResponse::text("sk-anything\n")]);
    let ws = Workspace::new(&[(".env", "API_KEY=\n"), ("src/lib.rs", LIB)]);
    let mut lsp = session(&ws, Some(mock.options()));
    let env = ws.uri(".env");
    lsp.open(&env, "dotenv", "API_KEY=\n");
    let result = lsp
        .request(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": env }, "position": { "line": 0, "character": 8 },
                    "context": { "triggerKind": 1 } }),
        )
        .unwrap();
    assert!(
        result.is_null() || result["items"].as_array().is_some_and(Vec::is_empty),
        "{result}"
    );
    assert!(mock.server.requests().is_empty(), "the model was asked");
    assert!(lsp.shutdown_and_exit().success());
}

/// The redactor is built once the server is initialized, before any
/// completion: the first one does not walk the workspace for dotenv files
/// itself. It knows the workspace's values from the start.
#[test]
fn the_redactor_is_ready_before_the_first_completion() {
    let mock = Mock::repeating("w * 2.0;\n");
    let secret = "sk-live-7f3e9a1c5b2d";
    let lib =
        format!("fn area(p: &Point) -> f64 {{\n    let key = \"{secret}\";\n    let w = \n}}\n");
    let ws = Workspace::new(&[
        ("src/lib.rs", lib.as_str()),
        (".env", &format!("API_KEY={secret}\n")),
    ]);
    let mut lsp = session(&ws, Some(mock.options()));
    // Messages pumped (the server's requests answered) until the index is
    // built: initialization has run its course.
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    assert!(
        lsp.stderr_says("redactor: secret values collected dotenv=1"),
        "no redactor built after initialization: {}",
        lsp.stderr()
    );
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", &lib);
    let result = complete(&mut lsp, &uri, 2, 12);
    assert_eq!(result["items"][0]["insertText"], "w * 2.0;", "{result}");
    let prompts = mock.prompts();
    assert_eq!(prompts.len(), 1);
    assert!(!prompts[0].contains(secret), "{}", prompts[0]);
    assert!(prompts[0].contains("let key"), "{}", prompts[0]);
    assert!(lsp.shutdown_and_exit().success());
}
