use super::*;

const GCD: &str = "def gcd(a, b):\n    if b == 0:\n        return a\n    else:\n        return gcd(a % b, b)\n\n\n\"\"\"\nDocs.\n\"\"\"\n";

fn candidate<'a>(path: &'a str, text: &'a str) -> Candidate<'a> {
    Candidate {
        path,
        language: Language::from_path(Path::new(path)).unwrap(),
        text,
    }
}

fn apply(text: &str, edits: &[BlockEdit]) -> String {
    let mut out = text.to_owned();
    for e in edits {
        assert_eq!(out.matches(&e.search).count(), 1, "{e:?}");
        out = out.replacen(&e.search, &e.replace, 1);
    }
    out
}

const BFS: &str = "from collections import deque as Queue\n\ndef bfs(start, goal):\n    queue = Queue()\n    queue.append(start)\n    while True:\n        node = queue.popleft()\n        if node is goal:\n            return True\n";

#[test]
fn an_import_the_fix_needs_goes_after_the_file_s_imports() {
    let answer = "```python\nfrom collections import deque\n\ndef bfs(start, goal):\n    queue = deque()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n    return False\n```";
    let blocks = fenced_blocks(answer);
    let edits = plan(&blocks[0], &[candidate("bfs.py", BFS)]).unwrap();
    assert_eq!(edits.len(), 2, "{edits:?}");
    assert_eq!(
            apply(BFS, &edits),
            "from collections import deque as Queue\nfrom collections import deque\n\ndef bfs(start, goal):\n    queue = deque()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n    return False\n"
        );
}

#[test]
fn the_tools_quoted_as_an_import_are_not_added() {
    // The 1.5B's levenshtein fix came with `from tools import …`: the
    // module would not import, and the fix was lost.
    let answer = "```python\nfrom tools import read_file, search, edit\nfrom collections import deque\n\ndef bfs(start, goal):\n    queue = deque()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n    return False\n```";
    let blocks = fenced_blocks(answer);
    let edits = plan(&blocks[0], &[candidate("bfs.py", BFS)]).unwrap();
    let fixed = apply(BFS, &edits);
    assert!(!fixed.contains("from tools"), "{fixed}");
    assert!(fixed.contains("from collections import deque\n"), "{fixed}");
    // One name may be the project's own.
    let answer = "```python\nfrom text import search\n\ndef bfs(start, goal):\n    return search(start, goal)\n```";
    let edits = plan(&fenced_blocks(answer)[0], &[candidate("bfs.py", BFS)]).unwrap();
    assert!(apply(BFS, &edits).contains("from text import search\n"));
}

#[test]
fn imports_the_file_has_are_not_added_again() {
    let answer = "```python\nfrom collections  import deque as Queue\n\ndef bfs(start, goal):\n    queue = Queue()\n    queue.append(start)\n    while queue:\n        node = queue.popleft()\n        if node is goal:\n            return True\n```";
    let blocks = fenced_blocks(answer);
    let edits = plan(&blocks[0], &[candidate("bfs.py", BFS)]).unwrap();
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert_eq!(apply(BFS, &edits), BFS.replace("while True", "while queue"));
}

#[test]
fn in_a_file_without_imports_the_import_goes_in_front_of_the_function() {
    let file = "def area(r):\n    return 3 * r * r\n";
    let answer = "```python\nimport math\n\ndef area(r):\n    return math.pi * r * r\n```";
    let blocks = fenced_blocks(answer);
    let edits = plan(&blocks[0], &[candidate("area.py", file)]).unwrap();
    assert_eq!(
        apply(file, &edits),
        "import math\n\ndef area(r):\n    return math.pi * r * r\n"
    );
    let rust = "use std::fmt;\n\nfn twice(x: u32) -> u32 {\n    x + x\n}\n";
    let answer = "```rust\nuse std::ops::Mul;\n\nfn twice(x: u32) -> u32 {\n    x.mul(2)\n}\n```";
    let edits = plan(&fenced_blocks(answer)[0], &[candidate("lib.rs", rust)]).unwrap();
    assert_eq!(
        apply(rust, &edits),
        "use std::fmt;\nuse std::ops::Mul;\n\nfn twice(x: u32) -> u32 {\n    x.mul(2)\n}\n"
    );
}

#[test]
fn a_corrected_function_in_prose_replaces_the_file_s_function() {
    let answer = "The recursion has its arguments swapped. Here is the fix:\n\n```python\ndef gcd(a, b):\n    if b == 0:\n        return a\n    else:\n        return gcd(b, a % b)\n```\n\nThis works because…";
    let blocks = fenced_blocks(answer);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].language.as_deref(), Some("python"));
    assert_eq!(defined_names(&blocks[0]), vec!["gcd"]);
    let edits = plan(&blocks[0], &[candidate("gcd.py", GCD)]).unwrap();
    let fixed = apply(GCD, &edits);
    assert_eq!(fixed, GCD.replace("gcd(a % b, b)", "gcd(b, a % b)"));
}

#[test]
fn a_method_is_reindented_into_its_class_and_a_new_helper_goes_first() {
    let file = "import math\n\nclass Shape:\n    def area(self):\n        return 1.0\n\n    def name(self):\n        return 'shape'\n";
    let answer = "```\ndef area(self):\n    return math.pi\n```";
    let blocks = fenced_blocks(answer);
    let edits = plan(&blocks[0], &[candidate("shape.py", file)]).unwrap();
    assert_eq!(
        apply(file, &edits),
        file.replace("return 1.0", "return math.pi")
    );

    let top = "def f(x):\n    return x\n\n\ndef g():\n    return f(1)\n";
    let answer = "```py\ndef helper(x):\n    return x + 1\n\ndef f(x):\n    return helper(x)\n```";
    let edits = plan(&fenced_blocks(answer)[0], &[candidate("m.py", top)]).unwrap();
    assert_eq!(edits[0].names, vec!["helper", "f"]);
    assert_eq!(
            apply(top, &edits),
            "def helper(x):\n    return x + 1\n\n\ndef f(x):\n    return helper(x)\n\n\ndef g():\n    return f(1)\n"
        );
}

#[test]
fn rust_functions_and_the_file_that_defines_them() {
    let lib = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
    let other = "fn main() {}\n";
    let answer =
        "Fix in **src/lib.rs**:\n```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```";
    let block = &fenced_blocks(answer)[0];
    assert_eq!(block.file_hint.as_deref(), Some("src/lib.rs"));
    let edits = plan(
        block,
        &[
            candidate("src/main.rs", other),
            candidate("src/lib.rs", lib),
        ],
    )
    .unwrap();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0].path, "src/lib.rs");
    assert_eq!(apply(lib, &edits), lib.replacen("a - b", "a + b", 1));
}

#[test]
fn blocks_that_are_not_edits_say_why() {
    let gcd = [candidate("gcd.py", GCD)];
    // The same code again.
    let same = "```python\ndef gcd(a, b):\n    if b == 0:\n        return a\n    else:\n        return gcd(a % b, b)\n```";
    assert_eq!(
        plan(&fenced_blocks(same)[0], &gcd),
        Err(NoEdit::Unchanged(vec!["gcd".into()]))
    );
    // A call, not a definition.
    let call = "```python\nprint(gcd(35, 21))\n```";
    assert_eq!(
        plan(&fenced_blocks(call)[0], &gcd),
        Err(NoEdit::NoDefinitions)
    );
    // Broken code is never put in place.
    let broken = "```python\ndef gcd(a, b:\n    return a\n```";
    assert!(matches!(
        plan(&fenced_blocks(broken)[0], &gcd),
        Err(NoEdit::SyntaxErrors(_))
    ));
    // A definition nobody has.
    let other = "```python\ndef lcm(a, b):\n    return a * b\n```";
    assert_eq!(
        plan(&fenced_blocks(other)[0], &gcd),
        Err(NoEdit::NoMatch(vec!["lcm".into()]))
    );
    // Another language than the file's.
    let rust = "```rust\nfn gcd(a: u32, b: u32) -> u32 { a }\n```";
    assert_eq!(
        plan(&fenced_blocks(rust)[0], &gcd),
        Err(NoEdit::NoDefinitions)
    );
    // Cut off before its closing fence: half a function is no edit.
    assert!(fenced_blocks("```python\ndef gcd(a, b):\n    return").is_empty());
}

#[test]
fn an_answer_cut_inside_its_block_keeps_the_complete_tests() {
    // As the 1.5B answered: asserts repeated until the token limit.
    let answer = "Here are the tests:\n```python\n# tests/test_gcd.py\nfrom gcd import gcd\n\ndef test_small():\n    assert gcd(35, 21) == 7\n\ndef test_more():\n    assert gcd(13, 13) == 13\n    assert gcd(1";
    let block = unclosed_block(answer).expect("the open block");
    assert_eq!(block.language.as_deref(), Some("python"));
    assert!(block.code.ends_with("== 13"), "{:?}", block.code);
    let code = complete_beginning(Language::Python, &block.code).expect("complete part");
    assert!(
        code.contains("def test_more():\n    assert gcd(13, 13) == 13\n"),
        "{code}"
    );
    // Cut right after a `def` line: the function without a body goes.
    let cut = "```python\ndef test_a():\n    assert f(1) == 2\n\ndef test_b():\n";
    let code = complete_beginning(Language::Python, &unclosed_block(cut).unwrap().code);
    assert_eq!(
        code.as_deref(),
        Some("def test_a():\n    assert f(1) == 2\n")
    );
    // A closed block is not cut; nothing complete is nothing.
    assert_eq!(unclosed_block("```python\ndef f(): pass\n```\n"), None);
    assert_eq!(unclosed_block("no code at all"), None);
    assert_eq!(complete_beginning(Language::Python, "def test_a(:"), None);
    assert_eq!(
        complete_beginning(Language::Python, "x = 1\nprint(x)"),
        None
    );
    // After a closed block, the open one is the cut one.
    let two = "```\nexample\n```\n```python\ndef test_c():\n    pass\n";
    assert_eq!(unclosed_block(two).unwrap().code, "def test_c():\n    pass");
}

#[test]
fn fences_and_hints() {
    let text = "x\n~~~~ python gcd.py\ndef f(): pass\n```\nstill inside\n~~~~\n`inline` ```not a fence\n````\na\n````";
    let blocks = fenced_blocks(text);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].code, "def f(): pass\n```\nstill inside");
    assert_eq!(blocks[0].file_hint.as_deref(), Some("gcd.py"));
    assert_eq!(blocks[1].code, "a");
    assert_eq!(blocks[1].language, None);
    let crlf = "```python\r\ndef f():\r\n    pass\r\n```\r\n";
    assert_eq!(fenced_blocks(crlf)[0].code, "def f():\n    pass");
}
