//! Neovim's code action, `:Fettle rewrite` and `:Fettle chat`, each applied and undone.

use super::*;

/// The issue's "done when": in Neovim 0.11, a user selects a function and
/// picks "Fettle: Add documentation" from `vim.lsp.buf.code_action()`: the
/// function is documented (only the changed line is sent), and one `u`
/// undoes it.
#[test]
fn neovim_code_action_documents_a_function_and_one_undo_restores_it() {
    let Some(value) = document_total(
        "code_action.lua",
        &[("FETTLE_TITLE", "Fettle: Add documentation")],
    ) else {
        return;
    };
    let titles: Vec<&str> = value["titles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        titles.contains(&"Fettle: Rewrite…") && titles.contains(&"Fettle: Simplify"),
        "{titles:?}"
    );
}

/// The plugin's `:4,8Fettle rewrite` (set up with `require('fettle').setup()`),
/// the instruction typed at its prompt: rewritten, and one `u` undoes it.
#[test]
fn neovim_fettle_rewrite_command_prompts_applies_and_undoes() {
    let Some(value) = document_total(
        "rewrite_command.lua",
        &[("FETTLE_INSTRUCTION", "Add a docstring")],
    ) else {
        return;
    };
    assert_eq!(value["prompt"], "Fettle rewrite: ", "{value:#}");
}

/// Runs `fixture` in a headless Neovim on `SHOP_PY` (lines 4–8 selected)
/// with a mock model that documents `total`; checks the documented buffer
/// and that one `u` restores it. `None` when Neovim is missing.
fn document_total(fixture: &str, env: &[(&str, &str)]) -> Option<Value> {
    let ws = Workspace::new(&[("shop.py", SHOP_PY)]);
    let answer = "Here it is:\n```python\ndef total(items):\n    \"\"\"Return the summed price of `items`.\"\"\"\n    result = 0\n    for item in items:\n        result = result + item.price\n    return result\n```";
    let script = fettle::mock::Script::from_json(
        &serde_json::json!({ "responses": [ { "text": answer } ] }).to_string(),
    )
    .unwrap();
    let mock = crate::e2e::harness::BackgroundMock::start(script);
    let init = serde_json::json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", mock.server.url()), "model": "mock", "max_retries": 0 } },
        "edit": { "model": "mock" },
    });
    let mut env = env.to_vec();
    let init = init.to_string();
    env.extend([
        ("FETTLE_INIT", init.as_str()),
        ("FETTLE_FIRST", "4"),
        ("FETTLE_LAST", "8"),
    ]);
    let (value, log) = run_plugin_fixture(fixture, &ws, "shop.py", &env)?;
    let documented = SHOP_PY.replace(
        "def total(items):\n",
        "def total(items):\n    \"\"\"Return the summed price of `items`.\"\"\"\n",
    );
    let lines = |text: &str| serde_json::json!(text.lines().collect::<Vec<_>>());
    assert_eq!(value["after"], lines(&documented), "{value:#}\n{log}");
    assert_eq!(
        value["undone"],
        lines(SHOP_PY),
        "one `u` undoes it: {value:#}"
    );
    Some(value)
}

/// `:Fettle chat` runs the repair loop on the open file, and `:Fettle log`
/// shows what the agent did, from `fettle/taskEvent`.
#[test]
fn neovim_fettle_chat_fixes_and_the_log_shows_the_tools() {
    let ws = Workspace::new(&[("models.py", MODELS), ("check.py", INVOICE_CHECK)]);
    let script = fettle::mock::Script::from_json(
        r#"{"responses": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "models.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "models.py", "search": "        return self.amount - 1\n", "replace": "        return self.amount\n"}}]},
            {"text": "Fixed `total`."},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "models.py"}}]},
            {"tool_calls": [{"name": "edit", "arguments": {"path": "models.py", "search": "        return self.amount - 1\n", "replace": "        return self.amount\n"}}]},
            {"text": "Fixed it again."}
        ]}"#,
    )
    .unwrap();
    let mock = crate::e2e::harness::BackgroundMock::start(script);
    let init = serde_json::json!({
        "models": { "mock": { "provider": "openai", "base_url": format!("{}/v1", mock.server.url()), "model": "mock", "max_retries": 0 } },
        "agent": { "model": "mock", "test_command": "python3 check.py" },
    });
    let init = init.to_string();
    let env = [
        ("FETTLE_INIT", init.as_str()),
        ("FETTLE_MESSAGE", "make check.py pass"),
        ("FETTLE_FOLLOW_UP", "do it again and keep it"),
    ];
    let Some((value, log)) = run_plugin_fixture("chat_log.lua", &ws, "models.py", &env) else {
        return;
    };
    assert_eq!(value["result"]["status"], "success", "{value:#}\n{log}");
    let fixed = MODELS.replace("self.amount - 1", "self.amount");
    let lines = |text: &str| serde_json::json!(text.lines().collect::<Vec<_>>());
    assert_eq!(value["fixed"], lines(&fixed), "{value:#}");
    // `:Fettle diff`: the task's diff in a split.
    assert_eq!(value["diff_filetype"], "diff", "{value:#}");
    assert!(
        value["diff_name"]
            .as_str()
            .unwrap()
            .starts_with("fettle://diff/"),
        "{value:#}"
    );
    let diff = value["diff"].as_array().unwrap();
    let in_diff = |l: &str| diff.iter().any(|d| d == l);
    assert!(
        in_diff("-        return self.amount - 1") && in_diff("+        return self.amount"),
        "{diff:#?}"
    );
    // A follow-up that only answered: `:Fettle diff` still shows a change
    // (the last task's that made one), not "no finished task with changes".
    assert!(
        value["diff_after_answer_name"]
            .as_str()
            .unwrap()
            .starts_with("fettle://diff/"),
        "{value:#}"
    );
    assert!(
        value["diff_after_answer"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.starts_with("+ "))),
        "{value:#}"
    );
    // The file, the conversation, the log and the diff.
    assert_eq!(value["windows"], 4, "{value:#}");
    // `:Fettle undo`, run from the log window, restored the file in the buffer;
    // the follow-up made the fix again, and kept it.
    assert_eq!(value["undone"], lines(MODELS), "{value:#}");
    assert_eq!(value["lines"], lines(&fixed), "{value:#}");
    // Once: the server's message, not the plugin's too (two stop Neovim
    // at a "Press ENTER" prompt).
    let restored: Vec<&str> = value["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .filter(|m| m.contains("restored"))
        .collect();
    assert_eq!(
        restored,
        ["fettle: undo of task ".to_owned()
            + value["result"]["taskId"].as_str().unwrap()
            + ": restored models.py"],
        "the server's message, through vim.notify, without a trailing newline: {value:#}"
    );
    assert!(
        !value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().contains("not attached")),
        "{value:#}"
    );
    assert_eq!(value["log_name"], "fettle://log");
    // The log opens at its newest line.
    assert_eq!(
        value["log_cursor"].as_u64(),
        Some(value["log"].as_array().unwrap().len() as u64),
        "{value:#}"
    );
    // `:help` finds the shipped tags.
    assert_eq!(value["help"], "fettle.txt", "{value:#}");
    assert!(
        value["help_line"]
            .as_str()
            .unwrap()
            .contains("*:Fettle-undo!*"),
        "{value:#}"
    );
    // `:Fettle stats`: one figure a line, not a dumped table.
    let stats: Vec<&str> = value["stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        stats.iter().any(|l| l.starts_with("models."))
            && stats.iter().all(|l| l.contains(": ") && !l.contains('{')),
        "{stats:#?}"
    );
    // The follow-up continued the conversation: the model was told the
    // first request, how it ended and what it changed.
    assert_eq!(value["follow_up"]["status"], "success", "{value:#}");
    assert_eq!(value["follow_up"]["conversation"]["turns"], 2, "{value:#}");
    let requests = mock.server.requests();
    let told = requests
        .iter()
        .map(|r| r.body.to_string())
        .find(|b| b.contains("do it again and keep it"))
        .expect("the follow-up's request");
    assert!(
        told.contains("The user asked: make check.py pass")
            && told.contains("The task ended: success")
            && told.contains("+        return self.amount"),
        "{told}"
    );
    // `fettle://chat`: both messages, the model's text as it streamed, the
    // tool calls as they happened, each turn's end.
    let chat: Vec<&str> = value["chat"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let at = |needle: &str| chat.iter().position(|l| l.contains(needle));
    let (Some(first), Some(second)) = (
        at("You: make check.py pass"),
        at("You: do it again and keep it"),
    ) else {
        panic!("{chat:#?}");
    };
    assert!(first < second, "{chat:#?}");
    assert!(
        at("· ").is_some()
            && chat.iter().filter(|l| **l == "[success]").count() == 2
            && at("Fixed `total`.").is_some()
            && at("Fixed it again.").is_some(),
        "{chat:#?}"
    );
    // A step's further lines below it: the suspects, each with why.
    let suspects = at("  · Suspects, most likely first:").expect("the suspects step");
    assert!(
        chat.get(suspects + 1)
            .is_some_and(|l| l.starts_with("    ") && l.contains("(models.py:")),
        "{chat:#?}"
    );
    assert_eq!(value["chat_windows"], 1, "{value:#}");
    let shown = value["log"].as_array().unwrap();
    let has = |needle: &str| shown.iter().any(|l| l.as_str().unwrap().contains(needle));
    assert!(
        has("tool_call") && has("read_file") && has("edit"),
        "{shown:#?}"
    );
    // The whole summary is in the log, not only the notification's line.
    let summary_line = format!(
        "[{}] summary: {}",
        value["result"]["taskId"].as_str().unwrap(),
        value["result"]["summary"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap()
    );
    assert!(has(&summary_line), "{summary_line}\n{shown:#?}");
    assert!(
        value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().starts_with("Fettle: success")),
        "{value:#}"
    );
    assert!(
        value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "Fettle: ghost text off"),
        "{value:#}"
    );
}
