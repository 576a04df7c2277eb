//! `textDocument/inlineCompletion` over the real binary, against the mock
//! model server on 127.0.0.1.
use std::time::{Duration, Instant};

use fettle::mock::{Script, ScriptedResponse};
use serde_json::{json, Value};

use super::harness::{BackgroundMock, Lsp, Workspace};

/// The mock model, with what these tests ask of it.
struct Mock(BackgroundMock);

impl std::ops::Deref for Mock {
    type Target = BackgroundMock;
    fn deref(&self) -> &BackgroundMock {
        &self.0
    }
}

impl Mock {
    fn start(responses: Vec<ScriptedResponse>) -> Self {
        Self(BackgroundMock::start(Script::new(responses)))
    }

    /// A mock answering every request with `text`.
    fn repeating(text: &str) -> Self {
        Self::start(vec![ScriptedResponse {
            repeat: true,
            ..ScriptedResponse::text(text)
        }])
    }

    /// Initialization options pointing completion at this server.
    fn options(&self) -> Value {
        json!({
            "models": { "mock": {
                "provider": "openai", "base_url": format!("{}/v1", self.server.url()),
                "model": "starcoder2-3b", "fim_template": "starcoder", "timeout_ms": 3000,
                "max_retries": 0,
            } },
            "completion": { "model": "mock" },
        })
    }

    fn prompts(&self) -> Vec<String> {
        self.0
            .server
            .requests()
            .iter()
            .filter(|r| r.path == "/v1/completions")
            .map(|r| r.body["prompt"].as_str().unwrap_or("").to_owned())
            .collect()
    }
}

const LIB: &str =
    "use crate::geometry::Point;\n\nfn area(p: &Point) -> f64 {\n    let w = \n    w\n}\n";

fn workspace() -> Workspace {
    Workspace::new(&[
        ("src/lib.rs", LIB),
        (
            "src/geometry.rs",
            "pub struct Point {\n    pub x: f64,\n    pub y: f64,\n}\n",
        ),
    ])
}

/// The server, initialized for `ws` (UTF-16 positions) with `options`.
fn session(ws: &Workspace, options: Option<Value>) -> Lsp {
    Lsp::initialized(&ws.root(), Lsp::capabilities(&["utf-16"]), options).0
}

/// [`session`] for [`workspace`] with `src/lib.rs` open: the workspace
/// (keep it for the test's life), the server, and the file's URI.
fn open_lib(options: Value) -> (Workspace, Lsp, String) {
    let ws = workspace();
    let mut lsp = session(&ws, Some(options));
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", LIB);
    (ws, lsp, uri)
}

/// The server, initialized with `capabilities` and `options` for a
/// workspace of the one Rust file `path` holding `text`, with that file
/// open: as [`open_lib`].
fn open_alone(
    path: &str,
    text: &str,
    capabilities: Value,
    options: Value,
) -> (Workspace, Lsp, String) {
    let ws = Workspace::new(&[(path, text)]);
    let (mut lsp, _) = Lsp::initialized(&ws.root(), capabilities, Some(options));
    let uri = ws.uri(path);
    lsp.open(&uri, "rust", text);
    (ws, lsp, uri)
}

/// Sends a `didChange` inserting `text` at `(line, character)`.
pub(super) fn insert(
    lsp: &mut Lsp,
    uri: &str,
    version: i32,
    (line, character): (u32, u32),
    text: &str,
) {
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": version },
                "contentChanges": [ { "range": { "start": { "line": line, "character": character },
                                                 "end": { "line": line, "character": character } },
                                      "text": text } ] }),
    );
}

/// An automatic inline completion request at `(line, character)`.
pub(super) fn complete(lsp: &mut Lsp, uri: &str, line: u32, character: u32) -> Value {
    lsp.request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character },
                "context": { "triggerKind": 2 } }),
    )
    .unwrap()
}

#[test]
fn completes_at_the_cursor_with_the_prompt_the_template_lays_out() {
    let mock = Mock::start(vec![ScriptedResponse::text(
        "p.x * p.y;\n    let h = 2.0;\n",
    )]);
    let ws = workspace();
    let (mut lsp, init) = Lsp::initialized(
        &ws.root(),
        Lsp::capabilities(&["utf-16"]),
        Some(mock.options()),
    );
    assert_eq!(init["capabilities"]["inlineCompletionProvider"], true);
    assert!(init["capabilities"]["executeCommandProvider"]["commands"]
        .as_array()
        .unwrap()
        .contains(&json!("fettle.acceptCompletion")));
    lsp.notification("$/progress", |p| p["value"]["kind"] == "end");
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", LIB);

    let result = complete(&mut lsp, &uri, 3, 12);
    let items = result["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{result}");
    assert_eq!(items[0]["insertText"], "p.x * p.y;");
    assert_eq!(
        items[0]["range"],
        json!({ "start": { "line": 3, "character": 12 }, "end": { "line": 3, "character": 12 } })
    );
    assert_eq!(items[0]["command"]["command"], "fettle.acceptCompletion");

    let prompts = mock.prompts();
    assert_eq!(prompts.len(), 1);
    let prompt = &prompts[0];
    let (before, after) = LIB.split_at(LIB.find("let w = ").unwrap() + "let w = ".len());
    assert!(prompt.contains("<fim_prefix>"), "{prompt}");
    assert!(
        prompt.ends_with(&format!("{before}<fim_suffix>{after}<fim_middle>")),
        "{prompt}"
    );
    // The type in the signature, defined in another file, comes along.
    assert!(prompt.contains("pub struct Point"), "{prompt}");
    assert!(prompt.contains("geometry.rs"), "{prompt}");

    // Accepting is counted in the local statistics.
    let id = items[0]["command"]["arguments"][0]["id"].clone();
    lsp.request(
        "workspace/executeCommand",
        json!({ "command": "fettle.acceptCompletion", "arguments": [ { "id": id } ] }),
    )
    .unwrap();
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(
        (stats["shown"].clone(), stats["accepted"].clone()),
        (json!(1), json!(1)),
        "{stats}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn typing_through_a_suggestion_is_served_from_the_cache() {
    let mock = Mock::start(vec![ScriptedResponse::text("p.x * p.y;\n")]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    let first = complete(&mut lsp, &uri, 3, 12);
    assert_eq!(first["items"][0]["insertText"], "p.x * p.y;");

    for (version, typed) in [(2, "p"), (3, ".")] {
        let at = 10 + version as u32;
        insert(&mut lsp, &uri, version, (3, at), typed);
    }
    let again = complete(&mut lsp, &uri, 3, 14);
    assert_eq!(again["items"][0]["insertText"], "x * p.y;", "{again}");
    assert_eq!(
        mock.prompts().len(),
        1,
        "typing through must not reach the model"
    );
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["cacheHits"], 1, "{stats}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn stats_break_a_completion_down_stage_by_stage() {
    let mock = Mock::start(vec![ScriptedResponse::text("p.x * p.y;\n")]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    let first = complete(&mut lsp, &uri, 3, 12);
    assert_eq!(first["items"][0]["insertText"], "p.x * p.y;");
    // The write is timed once it is done, which may be just after the
    // client has the answer.
    let written = |stats: &Value| {
        stats["stagesMs"]
            .as_array()
            .and_then(|stages| stages.iter().find(|s| s["stage"] == "write"))
            .is_some_and(|write| write["count"] == 1)
    };
    let stats = lsp.poll("fettle/stats", json!({}), written);
    let stages = stats["stagesMs"].as_array().expect("stagesMs");
    let names: Vec<&str> = stages
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "read",
            "parse",
            "dispatch",
            "locate",
            "context",
            "spawn",
            "send",
            "firstByte",
            "stream",
            "postprocess",
            "join",
            "handler",
            "serialize",
            "write"
        ]
    );
    let ms = |name: &str| {
        let stage = stages.iter().find(|s| s["stage"] == name).unwrap();
        assert_eq!(stage["count"], 1, "{name}: {stage}");
        stage["p50"].as_f64().unwrap()
    };
    // The engine's stages happen inside its end to end, which happens
    // inside the handler; the model's inside the wait for it.
    let sum = |names: &[&str]| names.iter().map(|s| ms(s)).sum::<f64>();
    const MODEL: [&str; 6] = [
        "spawn",
        "send",
        "firstByte",
        "stream",
        "postprocess",
        "join",
    ];
    let engine = sum(&["locate", "context"]) + sum(&MODEL);
    let slack = 0.01; // each value is rounded to a microsecond
    let end_to_end = stats["endToEndMs"]["p50"].as_f64().unwrap();
    assert!(engine <= end_to_end + slack, "{stats}");
    assert!(end_to_end <= ms("handler") + slack, "{stats}");
    let model = sum(&MODEL);
    assert!(
        model <= stats["modelMs"]["p50"].as_f64().unwrap() + slack,
        "{stats}"
    );
    for name in ["read", "parse", "serialize", "write"] {
        ms(name);
    }
    // The one request is the slowest, with the engine's stages it went
    // through (the protocol layer's are not per request).
    let slowest = stats["slowest"].as_array().expect("slowest");
    assert_eq!(slowest.len(), 1, "{stats}");
    assert_eq!(slowest[0]["request"], 1);
    assert_eq!(slowest[0]["totalMs"], stats["endToEndMs"]["p50"]);
    let its_stages = slowest[0]["stages"].as_array().unwrap();
    let names: Vec<&str> = its_stages
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    let engine_stages: Vec<&str> = ["locate", "context"].into_iter().chain(MODEL).collect();
    assert_eq!(names, engine_stages, "{stats}");
    for stage in its_stages {
        let name = stage["stage"].as_str().unwrap();
        assert_eq!(stage["ms"].as_f64(), Some(ms(name)), "{name}");
    }
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn single_line_answers_leave_the_connection_open_for_the_next() {
    let mock = Mock::repeating("p.x * p.y;\nlet more = 1;\n");
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    for (version, col) in [(2, 12), (3, 12), (4, 12)] {
        // A fresh place each time (nothing from the cache).
        insert(&mut lsp, &uri, version, (3, 0), " ");
        let result = complete(&mut lsp, &uri, 3, col + version as u32 - 1);
        assert_eq!(result["items"][0]["insertText"], "p.x * p.y;", "{result}");
        // The rest of the answer is read in the background.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(mock.prompts().len(), 3);
    // One, unless a drain on a loaded machine outlived its 20 ms; without
    // the drain, each completion opened its own.
    let connections = mock.server.connections();
    assert!(
        connections < 3,
        "{connections} connections for 3 completions"
    );
    assert!(lsp.shutdown_and_exit().success());
}

/// Opening a file connects to the completion model ahead (a `HEAD`, not a
/// request to the model): the first completion finds the connection open,
/// and typing on does not knock again while it is in use.
#[test]
fn opening_a_file_connects_to_the_model_ahead() {
    let mock = Mock::repeating("p.x * p.y;\n");
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    // The server has its answer (and the connection is back in its pool)
    // when it logs it; the mock counts the HEAD a moment before.
    assert!(
        lsp.stderr_says("connected to the model ahead"),
        "no connection made ahead"
    );
    assert_eq!(mock.server.heads(), 1);
    assert_eq!(mock.server.connections(), 1);
    assert!(mock.server.requests().is_empty(), "a HEAD is not recorded");
    for (version, col) in [(2, 13), (3, 14)] {
        insert(&mut lsp, &uri, version, (3, 0), " ");
        let result = complete(&mut lsp, &uri, 3, col);
        assert_eq!(result["items"][0]["insertText"], "p.x * p.y;", "{result}");
    }
    assert_eq!(mock.prompts().len(), 2);
    assert_eq!(
        mock.server.connections(),
        1,
        "the completions used the connection made ahead"
    );
    assert_eq!(mock.server.heads(), 1, "used lately: no second HEAD");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn utf8_positions_with_non_ascii_text_before_the_cursor() {
    let text = "fn main() {\n    let s = \"😀 名前\"; let n = \n}\n";
    let mock = Mock::start(vec![ScriptedResponse::text("s.len();\n")]);
    let (_ws, mut lsp, uri) = open_alone(
        "src/main.rs",
        text,
        Lsp::capabilities(&["utf-8"]),
        mock.options(),
    );
    let line = text.lines().nth(1).unwrap();
    let col = line.len() as u32; // bytes: utf-8 session
    let result = complete(&mut lsp, &uri, 1, col);
    assert_eq!(result["items"][0]["insertText"], "s.len();", "{result}");
    assert_eq!(result["items"][0]["range"]["start"]["character"], col);
    let prompt = &mock.prompts()[0];
    assert!(
        prompt.contains("let s = \"😀 名前\"; let n = <fim_suffix>"),
        "{prompt}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn an_unknown_document_is_a_clear_error() {
    let ws = workspace();
    let mut lsp = session(&ws, None);
    let err = lsp
        .request(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": ws.uri("src/nope.rs") }, "position": { "line": 0, "character": 0 } }),
        )
        .unwrap_err();
    assert!(
        err["message"].as_str().unwrap().contains("is not open"),
        "{err}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn recently_edited_code_in_another_open_file_reaches_the_prompt() {
    let mock = Mock::start(vec![ScriptedResponse::text("p.x * p.y;\n")]);
    let ws = workspace();
    let mut lsp = session(&ws, Some(mock.options()));
    let geometry = ws.uri("src/geometry.rs");
    let text = std::fs::read_to_string(ws.path("src/geometry.rs")).unwrap();
    lsp.open(&geometry, "rust", &text);
    insert(
        &mut lsp,
        &geometry,
        2,
        (4, 0),
        "\npub fn shoelace_area(points: &[Point]) -> f64 {\n    0.0\n}\n",
    );
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", LIB);
    let result = complete(&mut lsp, &uri, 3, 12);
    assert_eq!(result["items"][0]["insertText"], "p.x * p.y;", "{result}");
    let prompt = &mock.prompts()[0];
    assert!(prompt.contains("shoelace_area"), "{prompt}");
    assert!(lsp.shutdown_and_exit().success());
}

/// A Python file whose last line wants completing (line 2, character 8).
const CALC_PY: &str = "numbers = [1, 2, 3, 4, 5]\nsquares = [n * n for n in numbers]\ncubes = \n";

#[test]
fn an_invoked_request_offers_distinct_alternatives() {
    let mock = Mock::start(vec![
        ScriptedResponse::text("p.x * p.y;\n"),
        ScriptedResponse::text("p.y * p.x;\n"),
        ScriptedResponse::text("p.x * p.y;\n"),
    ]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    let result = lsp
        .request(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 },
                    "context": { "triggerKind": 1 } }),
        )
        .unwrap();
    let mut texts: Vec<&str> = result["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["insertText"].as_str().unwrap())
        .collect();
    texts.sort();
    assert_eq!(
        texts,
        ["p.x * p.y;", "p.y * p.x;"],
        "duplicates are dropped: {result}"
    );
    let temperatures: Vec<f64> = mock
        .server
        .requests()
        .iter()
        .map(|r| r.body["temperature"].as_f64().unwrap())
        .collect();
    assert_eq!(temperatures.len(), 3);
    assert_eq!(
        temperatures.iter().filter(|t| **t >= 0.8).count(),
        2,
        "{temperatures:?}"
    );
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn where_the_user_was_working_in_another_file_reaches_the_prompt() {
    let mock = Mock::repeating("p.x * p.y;\n");
    let util =
        "pub fn checksum_of_frames(frames: &[u8]) -> u32 {\n    let total = \n    total\n}\n";
    let ws = Workspace::new(&[("src/lib.rs", LIB), ("src/util.rs", util)]);
    let mut lsp = session(&ws, Some(mock.options()));
    let util_uri = ws.uri("src/util.rs");
    lsp.open(&util_uri, "rust", util);
    complete(&mut lsp, &util_uri, 1, 16);
    let uri = ws.uri("src/lib.rs");
    lsp.open(&uri, "rust", LIB);
    complete(&mut lsp, &uri, 3, 12);
    let prompts = mock.prompts();
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1].contains("checksum_of_frames"), "{}", prompts[1]);
    assert!(lsp.shutdown_and_exit().success());
}

/// A position past the end of a line, or of the document, is clamped (as
/// LSP says) and the item's range is the clamped position, never the one
/// sent (`line 99999` used to come back as it was): in each encoding, after
/// non-ASCII text whose width differs between them.
#[test]
fn positions_past_the_end_are_clamped_in_the_items_range() {
    let first = "    let s = \"😀 名前\"; let n = ";
    let last = "    let m = \"名前 😀\"; let k = ";
    let text = format!("fn main() {{\n{first}\n{last}");
    for encoding in ["utf-8", "utf-16", "utf-32"] {
        let mut answer = ScriptedResponse::text("42;");
        answer.repeat = true;
        let mock = Mock::start(vec![answer]);
        let ws = Workspace::new(&[("src/main.rs", &text)]);
        let (mut lsp, init) = Lsp::initialized(
            &ws.root(),
            Lsp::capabilities(&[encoding]),
            Some(mock.options()),
        );
        assert_eq!(init["capabilities"]["positionEncoding"], encoding);
        let uri = ws.uri("src/main.rs");
        lsp.open(&uri, "rust", &text);
        let width = |s: &str| match encoding {
            "utf-8" => s.len(),
            "utf-16" => s.encode_utf16().count(),
            _ => s.chars().count(),
        };
        let end_of_first = json!({ "line": 1, "character": width(first) });
        let end_of_document = json!({ "line": 2, "character": width(last) });
        for ((line, character), want) in [
            ((1, 99_999), &end_of_first),
            ((2, 99_999), &end_of_document),
            ((99_999, 0), &end_of_document),
            ((99_999, 99_999), &end_of_document),
        ] {
            let result = complete(&mut lsp, &uri, line, character);
            assert_eq!(
                result["items"][0]["range"],
                json!({ "start": want, "end": want }),
                "{encoding}, sent {line}:{character}: {result}"
            );
        }
        assert!(lsp.shutdown_and_exit().success());
    }
}

mod embedded;
mod menu_item;
mod secrets;
mod superseded;
