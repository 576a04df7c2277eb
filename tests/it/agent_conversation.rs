//! A conversation per workspace from the terminal: `fettle fix --continue`
//! tells the model the earlier requests, how their tasks ended and what they
//! changed; a task without it starts a new conversation. (The editor's side:
//! `e2e::agent::a_chat_follow_up_continues_the_conversation`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::agent_common;

use agent_common::{fettle, Mock};
use fettle::mock::Script;
use serde_json::Value;

const CALC: &str = "def add(a, b):\n    return a - b\n";
const CHECK: &str = "from calc import add\nassert add(2, 3) == 5, 'add(2, 3) should be 5'\n";

#[test]
fn fix_continue_tells_the_model_the_earlier_requests_and_a_new_task_starts_afresh() {
    let script = Script::from_json(
        r#"{"responses": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "search": "    return a - b\n", "replace": "    return a + b\n"}}]},
            {"text": "Fixed add."},
            {"text": "Nothing else needs to change.", "repeat": true}
        ]}"#,
    )
    .unwrap();
    let mock = Mock::start(script);
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    let cache = temp.path().join("cache");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("calc.py"), CALC).unwrap();
    std::fs::write(ws.join("check.py"), CHECK).unwrap();
    std::fs::write(
        ws.join("fettle.toml"),
        mock.config("test_command = \"python3 check.py\""),
    )
    .unwrap();
    let ws_arg = ws.to_str().unwrap();
    let run = |extra: &[&str]| -> Value {
        let mut args = vec!["fix", "--json"];
        args.extend_from_slice(extra);
        args.push(ws_arg);
        let out = fettle(&args, &cache);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    let first = run(&["--goal", "make check.py pass"]);
    assert_eq!(first["status"], "success", "{first:#}");

    run(&["--continue", "--goal", "now also say what add does"]);
    let bodies = mock.bodies();
    let follow_up = bodies
        .iter()
        .find(|b| b.contains("now also say what add does"))
        .expect("the follow-up's request");
    assert!(
        follow_up.contains("The user asked: make check.py pass")
            && follow_up.contains("The task ended: success")
            && follow_up.contains("+    return a + b"),
        "{follow_up}"
    );

    run(&["--goal", "a new question"]);
    let bodies = mock.bodies();
    let fresh = bodies
        .iter()
        .find(|b| b.contains("a new question"))
        .expect("the new task's request");
    assert!(
        !fresh.contains("This request follows earlier ones"),
        "{fresh}"
    );
}
