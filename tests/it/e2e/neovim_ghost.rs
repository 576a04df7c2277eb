//! Ghost text in a real Neovim 0.11 with the shipped plugin's renderer
//! (`editors/nvim/lua/fettle/ghost.lua`), against the real server and the
//! mock model: what is drawn where, typing through, accepting whole, by
//! word and by line, clearing, stale answers, the Tab fallback.
use serde_json::{json, Value};

use super::harness::{BackgroundMock, Workspace};
use super::neovim::run_plugin_fixture;

const SHOP: &str = "def total(items):\n    return sum(i.price for i in items)\n\n\ndef describe(item):\n    label = \"🛒 \" + \n";

/// The mock model's answers, chosen by the end of the text before the
/// cursor (the FIM prompt's prefix, as it appears in the JSON body).
fn script() -> fettle::mock::Script {
    let answer = |prefix_end: &str, text: &str, delay_ms: u64| {
        json!({
            "when": { "contains": format!("{prefix_end}<fim_suffix>") },
            "text": text, "delay_ms": delay_ms, "repeat": true,
        })
    };
    let responses = json!([
        answer("+ it", "em.name.upper()", 0),
        answer("upper()\\n    ", "if not label:\n        return \"?\"", 0),
        answer("total = tot", "al([item])", 0),
        answer("slow = slo", "w_answer()", 1500),
        answer("print(", "label)", 0),
        // Typing gets one suggestion; <M-]> asks for alternatives (step 9).
        json!({ "when": { "contains": "count = cou<fim_suffix>" }, "text": "nt + 1" }),
        answer("count = cou", "nt * 2", 0),
        { "text": "", "repeat": true },
    ]);
    fettle::mock::Script::from_json(&json!({ "responses": responses }).to_string()).unwrap()
}

fn screen<'a>(value: &'a Value, step: &str) -> &'a Value {
    &value[step]
}

#[test]
fn neovim_ghost_text_is_drawn_typed_through_accepted_and_cleared() {
    let ws = Workspace::new(&[("shop.py", SHOP)]);
    let mock = BackgroundMock::start(script());
    let init = json!({
        "models": { "mock": {
            "provider": "openai", "base_url": format!("{}/v1", mock.server.url()),
            "model": "starcoder2-3b", "fim_template": "starcoder", "max_retries": 0,
        } },
        "completion": { "model": "mock", "multiline": "always" },
    })
    .to_string();
    let Some((value, log)) =
        run_plugin_fixture("ghost_text.lua", &ws, "shop.py", &[("FETTLE_INIT", &init)])
    else {
        return;
    };
    // Its colour differs from the text's in GUI and terminal colours alike.
    let highlight = &value["highlight"];
    assert!(
        highlight["fg"].is_number() && highlight["ctermfg"].is_number(),
        "{highlight:#}"
    );
    let line = "    label = \"🛒 \" + ";
    // 1. Drawn inline at the cursor, after the emoji (4 bytes in UTF-8).
    let shown = screen(&value, "shown");
    assert_eq!(shown["text"], "em.name.upper()", "{value:#}\n{log}");
    assert_eq!(shown["row"], 5, "{shown:#}");
    assert_eq!(shown["col"], line.len() + 2, "{shown:#}");
    assert_eq!(shown["cursor"], json!([5, line.len() + 2]), "{shown:#}");
    // 2. Typing what it says keeps the rest, without asking again.
    let through = screen(&value, "typed_through");
    assert_eq!(through["text"], "name.upper()", "{through:#}");
    assert_eq!(through["col"], line.len() + 5, "{through:#}");
    assert_eq!(through["requested"], shown["requested"], "{value:#}");
    // 3. A word, then the rest; one `u` takes back only the last accept.
    let word = screen(&value, "word");
    assert_eq!(word["line"], format!("{line}item.name"), "{word:#}");
    assert_eq!(word["text"], ".upper()", "{word:#}");
    let accepted = screen(&value, "accepted");
    assert_eq!(
        accepted["line"],
        format!("{line}item.name.upper()"),
        "{accepted:#}"
    );
    assert_eq!(
        accepted["cursor"][1],
        format!("{line}item.name.upper()").len()
    );
    assert_eq!(value["undone"], format!("{line}item.name"), "{value:#}");
    // 4. Several lines: the first inline, the others as virtual lines;
    // accepting a line keeps the rest; Esc clears it.
    let several = screen(&value, "several");
    assert_eq!(several["text"], "if not label:", "{several:#}");
    assert_eq!(
        several["lines"],
        json!(["        return \"?\""]),
        "{several:#}"
    );
    let accepted_line = screen(&value, "line");
    assert_eq!(
        accepted_line["line"], "    if not label:",
        "{accepted_line:#}"
    );
    assert_eq!(accepted_line["marks"], 1, "{accepted_line:#}");
    let escaped = screen(&value, "escaped");
    assert_eq!(escaped["marks"], 0, "{escaped:#}");
    assert_eq!(escaped["visible"], false, "{escaped:#}");
    // 5. A keystroke the suggestion does not say clears it; so does
    // moving the cursor.
    assert_eq!(screen(&value, "before_mismatch")["text"], "al([item])");
    let mismatch = screen(&value, "mismatch");
    assert_eq!(mismatch["marks"], 0, "{mismatch:#}");
    assert!(
        mismatch["line"].as_str().unwrap().ends_with("total = totZ"),
        "{mismatch:#}"
    );
    let moved = screen(&value, "moved");
    assert_eq!(moved["marks"], 0, "{moved:#}");
    assert!(
        moved["line"].as_str().unwrap().ends_with("total = tot"),
        "{moved:#}"
    );
    // 6. The answer for a cursor that has moved since is never drawn.
    let drawn: Vec<&str> = value["drawn"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!drawn.iter().any(|t| t.contains("answer")), "{drawn:?}");
    assert_eq!(screen(&value, "stale")["marks"], 0, "{value:#}");
    // 7. Closers the suggestion re-types: drawn before the `)` on screen,
    // and replaced on accept.
    let closer = screen(&value, "closer_shown");
    assert_eq!(closer["text"], "label", "{closer:#}");
    let closed = screen(&value, "closer_accepted")["line"].as_str().unwrap();
    assert!(closed.ends_with("print(label)"), "{closed}");
    // 8. Tab with nothing shown is a Tab.
    let tab = screen(&value, "tab");
    assert_eq!(screen(&value, "nothing_shown")["marks"], 0, "{value:#}");
    let indented = screen(&value, "nothing_shown")["line"].as_str().unwrap();
    assert_eq!(tab["line"], format!("{indented}    x"), "{tab:#}");
    // The three accepted suggestions were counted by the server.
    assert_eq!(value["stats"]["accepted"], 3, "{value:#}");
    // <M-]> with one suggestion: one explicit request, a different one shown;
    // then cycling among those without asking again.
    assert_eq!(
        screen(&value, "one_suggestion")["text"],
        "nt + 1",
        "{value:#}"
    );
    assert_eq!(screen(&value, "alternative")["text"], "nt * 2", "{value:#}");
    assert_eq!(value["alternative_requests"], 1, "{value:#}");
    assert_eq!(value["cycled_requests"], 1, "{value:#}");
    assert!(
        screen(&value, "cycled")["visible"].as_bool().unwrap(),
        "{value:#}"
    );
}
