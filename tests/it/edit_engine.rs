//! The edit engine without LSP: golden tests of what the model sees (the
//! prompt) and of what comes back (answer extraction and fitting), and the
//! range a quick fix grows to.
use std::path::Path;

use fettle::edit::answer::{extract_code, fit, Fit};
use fettle::edit::gather::{prepare, Sources};
use fettle::edit::{plan, scope, Ask, Problem, Snapshot};
use fettle::index::{IndexSettings, WorkspaceIndex};
use fettle::secrets::Redactor;
use fettle::syntax::{parse_str, Language};
use ropey::Rope;

const CART: &str = "import os\nfrom models import price\n\n\nclass Cart:\n    def __init__(self):\n        self.items = []\n\n    def total(self):\n        return sum(price(i) for i in self.items)\n\n    def clear(self):\n        self.items = []\n";

fn snapshot<'a>(path: &'a Path, text: &str, language: Language) -> Snapshot<'a> {
    Snapshot {
        path: Some(path),
        label: path.file_name().unwrap().to_string_lossy().into_owned(),
        language: Some(language),
        rope: Rope::from_str(text),
        tree: parse_str(language, text, None),
    }
}

fn byte_of(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in the text"))
}

#[test]
fn the_prompt_for_a_quick_fix() {
    let root = Path::new("/ws");
    let path = root.join("cart.py");
    let index = WorkspaceIndex::new(IndexSettings::default());
    index.update_text(
        &root.join("models.py"),
        Some(Language::Python),
        "API_KEY = 'sk-live-abcdefghijklmnop1234567890'\n\ndef price(item) -> float:\n    return item.cost\n",
    );
    let doc = snapshot(&path, CART, Language::Python);
    let at = byte_of(CART, "price(i)");
    let ask = Ask {
        range: at..at,
        instruction: None,
        problems: vec![Problem {
            range: at..at + 5,
            severity: Some("error".into()),
            source: Some("pyright".into()),
            code: Some("reportCallIssue".into()),
            message: "Expected 1 positional argument\n(second line)".into(),
        }],
    };
    let plan = plan(&doc, &ask).unwrap();
    assert_eq!(
        &CART[plan.range.clone()],
        "    def total(self):\n        return sum(price(i) for i in self.items)\n",
        "a quick fix takes the whole method"
    );
    let count = |s: &str| s.len() / 4;
    let redactor = Redactor::default();
    let sources = Sources {
        index: &index,
        root: Some(root),
        redactor: &redactor,
        max_prompt_tokens: 2000,
        context_tokens: None,
        model_name: "mock",
        count: &count,
    };
    let prepared = prepare(&doc, &plan, &ask.problems, &sources).unwrap();
    let shown: Vec<String> = prepared
        .messages
        .iter()
        .map(|m| format!("### {}\n{}", m.role.as_str(), m.content))
        .collect();
    insta::assert_snapshot!("quick_fix_prompt", shown.join("\n\n"));

    // A small budget drops the context before the selection, never the selection.
    let tight = Sources {
        max_prompt_tokens: 260,
        ..sources
    };
    let prepared = prepare(&doc, &plan, &ask.problems, &tight).unwrap();
    let user = &prepared.messages[1].content;
    assert!(user.contains("Selected code (lines 9-10)"), "{user}");
    assert!(user.contains("[pyright reportCallIssue]"), "{user}");
    let too_small = Sources {
        max_prompt_tokens: 50,
        ..tight
    };
    let refused = prepare(&doc, &plan, &ask.problems, &too_small)
        .err()
        .unwrap();
    assert!(refused.message.contains("too large"), "{}", refused.message);
}

#[test]
fn secrets_in_the_selection_never_reach_the_prompt_and_come_back() {
    let text =
        "def client():\n    return connect(token='ghp_abcdefghijklmnopqrstuvwxyz0123456789')\n";
    let path = Path::new("/ws/client.py");
    let doc = snapshot(path, text, Language::Python);
    let plan = plan(
        &doc,
        &Ask {
            range: 0..text.len(),
            instruction: Some("add a docstring".into()),
            problems: vec![],
        },
    )
    .unwrap();
    let index = WorkspaceIndex::new(IndexSettings::default());
    let redactor = Redactor::default();
    let count = |s: &str| s.len() / 4;
    let sources = Sources {
        index: &index,
        root: None,
        redactor: &redactor,
        max_prompt_tokens: 2000,
        context_tokens: None,
        model_name: "mock",
        count: &count,
    };
    let prepared = prepare(&doc, &plan, &[], &sources).unwrap();
    let everything: String = prepared
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert!(!everything.contains("ghp_abcdef"), "{everything}");
    let answer = prepared.redacted.text.replace(
        "def client():\n",
        "def client():\n    \"\"\"A connected client.\"\"\"\n",
    );
    let restored = prepared.redacted.restore(&answer).unwrap();
    assert!(restored.contains("token='ghp_abcdefghijklmnopqrstuvwxyz0123456789'"));
}

#[test]
fn answers_are_extracted_and_fitted() {
    let selection = "    def total(self):\n        return sum(self.items)\n";
    let before = [
        "class Cart:",
        "    def __init__(self):",
        "        self.items = []",
    ];
    let after = ["", "    def clear(self):", "        self.items = []"];
    let cases: &[(&str, &str)] = &[
        (
            "fence with prose around it",
            "Here is the simplified method:\n\n```python\n    def total(self):\n        return sum(i.price for i in self.items)\n```\n\nThis sums the prices.",
        ),
        (
            "think block first (with a fence inside it)",
            "<think>Maybe\n```python\nwrong\n```\n</think>\n```py\n    def total(self):\n        return 0\n```",
        ),
        (
            "dedented answer",
            "```python\ndef total(self):\n    \"\"\"Sum.\"\"\"\n    return sum(self.items)\n```",
        ),
        (
            "tab-indented answer",
            "```python\n\tdef total(self):\n\t\treturn sum(self.items) or 0\n```",
        ),
        (
            "no trailing newline, extra blank lines",
            "```python\n\n\n    def total(self):\n        return sum(self.items) + 1```",
        ),
        (
            "repeats the lines around the selection",
            "```python\n        self.items = []\n    def total(self):\n        return sum(self.items) * 2\n\n    def clear(self):\n```",
        ),
        (
            "bare code after a chat preamble",
            "Sure! Here's the code:\n    def total(self):\n        return len(self.items)\n",
        ),
        (
            "unclosed fence (the stream was cut)",
            "```python\n    def total(self):\n        return 42\n",
        ),
        ("only thinking", "<think>I will now"),
        ("only prose", "   \n"),
    ];
    let mut out = String::new();
    for (name, answer) in cases {
        let fitted = extract_code(answer).map(|code| {
            fit(
                &code,
                &Fit {
                    selection,
                    line_start: true,
                    before: before.to_vec(),
                    after: after.to_vec(),
                    instruction_comment: None,
                },
            )
        });
        out.push_str(&format!("== {name}\n"));
        match fitted {
            Some(text) => out.push_str(&text.replace('\t', "→")),
            None => out.push_str("(no code)\n"),
        }
    }
    insta::assert_snapshot!("fitted_answers", out);
}

#[test]
fn fitting_keeps_crlf_tabs_and_inline_selections() {
    let crlf = fit(
        "def f():\n    return 2\n",
        &Fit {
            selection: "def f():\r\n    return 1\r\n",
            line_start: true,
            before: vec![],
            after: vec![],
            instruction_comment: None,
        },
    );
    assert_eq!(crlf, "def f():\r\n    return 2\r\n");
    let tabs = fit(
        "    if x:\n        y()\n",
        &Fit {
            selection: "\tif x:\n\t\tz()\n",
            line_start: true,
            before: vec![],
            after: vec![],
            instruction_comment: None,
        },
    );
    assert_eq!(tabs, "\tif x:\n\t\ty()\n");
    let inline = fit(
        "  a + b\n",
        &Fit {
            selection: "a - b",
            line_start: false,
            before: vec![],
            after: vec![],
            instruction_comment: None,
        },
    );
    assert_eq!(inline, "a + b");
    let comment = fit(
        "x = {}\n# fettle: use a dict\ny = 1  # fettle: use a dict\n",
        &Fit {
            selection: "x = []\n# fettle: use a dict\n",
            line_start: true,
            before: vec![],
            after: vec![],
            instruction_comment: Some("# fettle: use a dict"),
        },
    );
    assert_eq!(comment, "x = {}\ny = 1\n");
}

#[test]
fn quick_fixes_grow_to_whole_syntactic_units() {
    let cases: &[(Language, &str, &str, &str)] = &[
        (
            Language::Python,
            "import x\n\n@cache\ndef f(a):\n    return a +\n\nprint(f(1))\n",
            "return a +",
            "@cache\ndef f(a):\n    return a +\n",
        ),
        (
            Language::Python,
            "A = 1\nB = [1,\n     2, 3\nC = 3\n",
            "2, 3",
            // The unclosed bracket's ERROR swallows `C = 3`; the block by
            // indentation stops before it.
            "B = [1,\n     2, 3\n",
        ),
        (
            Language::Rust,
            "struct S;\nimpl S {\n    fn go(&self) -> u8 {\n        1 +\n    }\n}\n",
            "1 +",
            "    fn go(&self) -> u8 {\n        1 +\n    }\n",
        ),
        (
            Language::JavaScript,
            "const a = 1;\nexport const add = (x, y) => {\n  return x + yy;\n};\n",
            "yy",
            "export const add = (x, y) => {\n  return x + yy;\n};\n",
        ),
        (
            Language::Go,
            "package main\n\nfunc (s *S) Get() int {\n\treturn s.x\n}\n",
            "s.x",
            "func (s *S) Get() int {\n\treturn s.x\n}\n",
        ),
    ];
    for (language, text, at, expected) in cases {
        let rope = Rope::from_str(text);
        let tree = parse_str(*language, text, None);
        let start = byte_of(text, at);
        let range = scope::fix_scope(&rope, tree.as_ref(), start..start + at.len());
        assert_eq!(&text[range], *expected, "{language:?}: {text}");
    }
}

/// Seen in Neovim: a missing `:` made tree-sitter wrap the file from its
/// first line in an ERROR, and the quick fix rewrote the whole file with
/// the instruction of an unrelated `fettle:` comment. Inside a syntax error
/// the fix takes the block the problem's line starts; a quick fix always
/// fixes.
#[test]
fn a_quick_fix_inside_a_syntax_error_takes_the_block_and_fixes() {
    let text = "import math\n\n\ndef area(r)\n    return math.pi * r * r\n\n\ndef double(x):\n    # fettle: accept strings\n    return x * 2\n";
    let path = Path::new("/ws/calc.py");
    let doc = snapshot(path, text, Language::Python);
    let at = byte_of(text, "def area(r)") + "def area(r)".len();
    let ask = Ask {
        range: at..at,
        instruction: None,
        problems: vec![Problem {
            range: at..at,
            message: "expected \":\"".into(),
            ..Problem::default()
        }],
    };
    let plan = plan(&doc, &ask).unwrap();
    assert_eq!(
        &text[plan.range.clone()],
        "def area(r)\n    return math.pi * r * r\n"
    );
    assert_eq!(plan.instruction, fettle::edit::FIX_INSTRUCTION);
    assert_eq!(plan.comment, None);
}

#[test]
fn definitions_outside_a_region_are_seen_at_the_top_levels() {
    let text = "def a():\n    pass\n\nclass K:\n    def m(self):\n        def inner():\n            pass\n\ndef b():\n    pass\n";
    let rope = Rope::from_str(text);
    let tree = parse_str(Language::Python, text, None).unwrap();
    let b = byte_of(text, "def b");
    let wanted: Vec<String> = ["a", "K", "m", "inner", "b", "zz"]
        .map(String::from)
        .to_vec();
    let wanted: Vec<&String> = wanted.iter().collect();
    let names = scope::defined_outside(&tree, &rope, b..text.len(), &wanted);
    assert_eq!(
        names,
        ["a", "K", "m"],
        "`inner` is too deep; `b` is inside; `zz` is nowhere"
    );
}
