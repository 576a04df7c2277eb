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
fn a_model_that_is_down_gives_an_empty_result_fast() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = json!({
        "models": { "down": { "provider": "openai", "base_url": format!("http://127.0.0.1:{port}/v1"), "model": "m", "max_retries": 0 } },
        "completion": { "model": "down" },
    });
    let (_ws, mut lsp, uri) = open_lib(options);
    let started = Instant::now();
    let result = complete(&mut lsp, &uri, 3, 12);
    assert!(result.is_null(), "{result}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["errors"], 1, "{stats}");
    assert!(lsp.shutdown_and_exit().success());
}

#[test]
fn a_newer_request_supersedes_and_a_stale_result_is_discarded() {
    let slow = ScriptedResponse {
        delay_ms: 600,
        repeat: true,
        ..ScriptedResponse::text("p.x;\n")
    };
    let mock = Mock::start(vec![slow]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());

    let params =
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } });
    let first = lsp.send_request("textDocument/inlineCompletion", params.clone());
    std::thread::sleep(Duration::from_millis(100));
    let second = lsp.send_request("textDocument/inlineCompletion", params);
    let started = Instant::now();
    let answer = lsp.response(&first);
    assert!(answer["result"].is_null(), "{answer}");
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "superseded answers at once"
    );

    // The document changes while the second waits for the model.
    std::thread::sleep(Duration::from_millis(100));
    insert(&mut lsp, &uri, 2, (0, 0), "// edited\n");
    let answer = lsp.response(&second);
    assert!(answer["result"].is_null(), "stale: {answer}");
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

/// Whether the embedded model's weights are installed; when they are not, a
/// test skips, unless FETTLE_REQUIRE_MODEL=1 (as in CI) makes it fail.
fn embedded_model_installed() -> bool {
    let model = fettle::config::expand_home(fettle::config::DEFAULT_LOCAL_MODEL_PATH);
    if model.is_file() {
        return true;
    }
    assert!(
        std::env::var_os("FETTLE_REQUIRE_MODEL").is_none_or(|v| v != "1"),
        "{} is missing; run `fettle model fetch`",
        model.display()
    );
    eprintln!("skipping: {} is missing", model.display());
    false
}

/// The real embedded model, end to end (skipped when it is not installed,
/// unless FETTLE_REQUIRE_MODEL=1, as in CI).
#[test]
fn completes_with_the_real_embedded_model() {
    if !embedded_model_installed() {
        return;
    }
    let text = CALC_PY;
    let ws = Workspace::new(&[("calc.py", text)]);
    // Greedy decoding, so the test sees the same answer every run.
    let options = json!({ "models": { "local": { "temperature": 0 } } });
    let mut lsp = session(&ws, Some(options));
    let uri = ws.uri("calc.py");
    lsp.open(&uri, "python", text);
    // Three samples queue on the one embedded engine; on a loaded machine
    // (the whole suite in one process) they can take longer than TIMEOUT.
    let result = lsp
        .request_within(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 2, "character": 8 },
                    "context": { "triggerKind": 1 } }),
            Duration::from_secs(180),
        )
        .unwrap();
    let insert = result["items"][0]["insertText"].as_str().unwrap_or("");
    assert!(
        !insert.trim().is_empty(),
        "{result}\n{}",
        lsp.stderr()
            .lines()
            .filter(|l| l.contains("completion"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(!insert.contains('\n'), "single-line here: {insert:?}");
    let stats = lsp.request("fettle/stats", json!({})).unwrap();
    assert_eq!(stats["shown"], 1, "{stats}");
    let stderr = lsp.stderr_log();
    let status = lsp.shutdown_and_exit();
    // The stderr reader may still be draining what was written at exit.
    std::thread::sleep(Duration::from_millis(200));
    assert!(status.success(), "{status}\n{}", stderr.lock().unwrap());
}

/// `shutdown` and `exit` while the embedded model is loading its weights,
/// generating or idle: the exit is clean every time. Exiting used to run
/// llama.cpp's static destructors under its busy thread, a SIGSEGV now and
/// then (this catches it only sometimes; a run of the old binary under
/// load crashed about once in 40 exits).
#[test]
fn exiting_while_the_embedded_model_works_is_clean() {
    if !embedded_model_installed() {
        return;
    }
    let text = CALC_PY;
    let ws = Workspace::new(&[("calc.py", text)]);
    let uri = ws.uri("calc.py");
    for delay_ms in [0, 50, 150, 300, 600, 1000] {
        let mut lsp = session(&ws, None);
        lsp.open(&uri, "python", text);
        lsp.send_request(
            "textDocument/inlineCompletion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": 2, "character": 8 },
                    "context": { "triggerKind": 1 } }),
        );
        std::thread::sleep(Duration::from_millis(delay_ms));
        let stderr = lsp.stderr_log();
        let status = lsp.shutdown_and_exit();
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            status.success(),
            "exit {delay_ms} ms after the request: {status}\n{}",
            stderr.lock().unwrap()
        );
    }
}

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
fn cancel_request_and_a_hanging_model_are_answered_promptly() {
    use fettle::mock::Fault;
    let hang = ScriptedResponse {
        fault: Some(Fault::Hang),
        repeat: true,
        ..Default::default()
    };
    let mock = Mock::start(vec![hang]);
    let mut options = mock.options();
    options["models"]["mock"]["timeout_ms"] = json!(400);
    let (_ws, mut lsp, uri) = open_lib(options);
    let params =
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } });

    // $/cancelRequest: RequestCancelled, at once.
    let id = lsp.send_request("textDocument/inlineCompletion", params.clone());
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    lsp.notify("$/cancelRequest", json!({ "id": id }));
    let answer = lsp.response(&id);
    assert_eq!(answer["error"]["code"], -32800, "{answer}");
    assert!(started.elapsed() < Duration::from_millis(300));

    // A model that never answers: an empty result within its timeout.
    let started = Instant::now();
    let result = complete(&mut lsp, &uri, 3, 12);
    assert!(result.is_null(), "{result}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
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

#[test]
fn a_keystroke_reuses_the_model_request_already_in_flight() {
    let slow = ScriptedResponse {
        delay_ms: 500,
        ..ScriptedResponse::text("p.x * p.y;\n")
    };
    let mock = Mock::start(vec![slow]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    let first = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } }),
    );
    std::thread::sleep(Duration::from_millis(150));
    // The user types the suggestion's first character while the model works.
    insert(&mut lsp, &uri, 2, (3, 12), "p");
    let second = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 13 } }),
    );
    assert!(lsp.response(&first)["result"].is_null(), "superseded");
    let answer = lsp.response(&second);
    assert_eq!(
        answer["result"]["items"][0]["insertText"], ".x * p.y;",
        "{answer}"
    );
    assert_eq!(
        mock.prompts().len(),
        1,
        "one model request served both keystrokes"
    );
    assert!(lsp.shutdown_and_exit().success());
}

/// VS Code cancels each inline completion request ($/cancelRequest) as the
/// user types on: the model request it started still serves the next one.
#[test]
fn a_request_the_client_cancels_leaves_its_model_request_to_the_next() {
    let slow = ScriptedResponse {
        delay_ms: 500,
        ..ScriptedResponse::text("p.x * p.y;\n")
    };
    let mock = Mock::start(vec![slow]);
    let (_ws, mut lsp, uri) = open_lib(mock.options());
    let first = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 12 } }),
    );
    std::thread::sleep(Duration::from_millis(150));
    lsp.notify("$/cancelRequest", json!({ "id": first }));
    let cancelled = lsp.response(&first);
    assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
    insert(&mut lsp, &uri, 2, (3, 12), "p");
    let second = lsp.send_request(
        "textDocument/inlineCompletion",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 3, "character": 13 } }),
    );
    let answer = lsp.response(&second);
    assert_eq!(
        answer["result"]["items"][0]["insertText"], ".x * p.y;",
        "{answer}"
    );
    assert_eq!(mock.prompts().len(), 1, "one model request for both");
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
