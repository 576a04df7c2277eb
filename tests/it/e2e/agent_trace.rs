//! The debugging agent from the editor: a stack trace pasted into the chat,
//! with the tests passing, gets a test that reproduces its error written
//! first (it must fail with the trace's `ZeroDivisionError`), then the fix;
//! the test stays, and the result says so.
use serde_json::json;

use super::agent::{chat, response_within, start, Mock};
use super::harness::Workspace;

const STATS: &str = "def mean(xs):\n    return sum(xs) / len(xs)\n";
const TESTS: &str = "from stats import mean\n\n\ndef test_mean():\n    assert mean([2, 4]) == 3\n";
const REPRODUCER: &str =
    "from stats import mean\n\n\ndef test_empty():\n    assert mean([]) == 0\n";

fn pytest_runs() -> bool {
    std::process::Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_trace_pasted_into_the_chat_is_reproduced_by_a_test_before_the_fix() {
    if !pytest_runs() {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_RUNNERS").is_none(),
            "pytest is required (FETTLE_REQUIRE_RUNNERS) and `python3 -m pytest` does not run"
        );
        eprintln!("skipping: no pytest");
        return;
    }
    let ws = Workspace::new(&[("stats.py", STATS), ("test_stats.py", TESTS)]);
    let cache = tempfile::tempdir().unwrap();
    let script = json!({ "responses": [
        { "tool_calls": [{ "name": "write_file", "arguments": { "path": "test_empty.py", "content": REPRODUCER } }] },
        { "text": "A test for the empty list." },
        { "tool_calls": [{ "name": "edit", "arguments": { "path": "stats.py", "search": "    return sum(xs) / len(xs)\n", "replace": "    return sum(xs) / len(xs) if xs else 0\n" } }] },
        { "text": "The mean of nothing is 0 here." }
    ]});
    let mock = Mock::start(&script.to_string());
    let options = mock.options(json!({
        "test_command": "python3 -m pytest -q -p no:cacheprovider",
        "mutants": false,
    }));
    let mut lsp = start(&ws, cache.path(), options);
    let trace = "The nightly report crashed:\nTraceback (most recent call last):\n  File \"/srv/app/report.py\", line 9, in main\n    print(mean(values))\n  File \"/srv/app/stats.py\", line 2, in mean\n    return sum(xs) / len(xs)\nZeroDivisionError: division by zero\n";
    let id = chat(&mut lsp, trace, json!({}));
    let response = response_within(&mut lsp, &id, 90);
    let result = &response["result"];
    assert_eq!(
        result["status"],
        "success",
        "{response:#}\n{}",
        lsp.stderr()
    );
    assert_eq!(
        result["testsWritten"],
        json!(["test_empty.py"]),
        "{result:#}"
    );
    let summary = result["summary"].as_str().unwrap();
    assert!(
        summary.contains("reproduced first, by a test in test_empty.py"),
        "{summary}"
    );
    let bodies: Vec<String> = mock
        .server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        bodies[0].contains("write a test that reproduces it")
            && bodies[0].contains("(`ZeroDivisionError`)")
            && bodies[0].contains("calls `mean` (from stats.py"),
        "{}",
        bodies[0]
    );
    assert_eq!(
        std::fs::read_to_string(ws.path("test_empty.py")).unwrap(),
        REPRODUCER
    );
}
