use super::*;

fn all(lang: Language, text: &str) -> Vec<Mutant> {
    let lines = u32::try_from(text.lines().count()).unwrap_or(u32::MAX);
    mutants(lang, text, (1, lines), 10_000)
}

/// The texts the mutants make, each with what it says it does.
fn results(lang: Language, text: &str) -> Vec<(String, String)> {
    all(lang, text)
        .iter()
        .map(|m| (m.apply(text).unwrap(), m.what.clone()))
        .collect()
}

fn has(results: &[(String, String)], text: &str) -> bool {
    results.iter().any(|(t, _)| t == text)
}

#[test]
fn a_comparison_becomes_its_neighbours() {
    let code = "def later(a, b):\n    return a > b\n";
    let r = results(Language::Python, code);
    assert!(has(&r, "def later(a, b):\n    return a >= b\n"), "{r:?}");
    assert!(has(&r, "def later(a, b):\n    return a < b\n"), "{r:?}");
    let first = &all(Language::Python, code)[0];
    assert_eq!(first.kind, Kind::Operator);
    assert_eq!(first.line, 2);
    assert_eq!(first.what, "`>` → `>=`");
}

#[test]
fn indices_and_arguments_are_swapped() {
    let code = "def total(d, i, j, k):\n    return d[i, k] + pow(j, k)\n";
    let r = results(Language::Python, code);
    assert!(
        has(
            &r,
            "def total(d, i, j, k):\n    return d[k, i] + pow(j, k)\n"
        ),
        "{r:?}"
    );
    assert!(
        has(
            &r,
            "def total(d, i, j, k):\n    return d[i, k] + pow(k, j)\n"
        ),
        "{r:?}"
    );
    // `+` is not commutative for strings and lists.
    assert!(
        has(
            &r,
            "def total(d, i, j, k):\n    return pow(j, k) + d[i, k]\n"
        ),
        "{r:?}"
    );
}

#[test]
fn an_attribute_becomes_another_of_the_lines() {
    let code = "def ready(node, done):\n    if node.inputs:\n        return set(done) >= set(node.outputs)\n";
    let r = results(Language::Python, code);
    assert!(has(&r, "def ready(node, done):\n    if node.inputs:\n        return set(done) >= set(node.inputs)\n"), "{r:?}");
}

#[test]
fn names_literals_builtins_and_conditions() {
    let code =
        "def pick(xs, lo, hi):\n    while lo < hi:\n        lo = max(lo, xs[0])\n    return True\n";
    let r = results(Language::Python, code);
    // A name read becomes another variable of the function; an assigned one does not.
    assert!(has(&r, "def pick(xs, lo, hi):\n    while lo < hi:\n        lo = max(hi, xs[0])\n    return True\n"), "{r:?}");
    assert!(!has(&r, "def pick(xs, lo, hi):\n    while lo < hi:\n        hi = max(lo, xs[0])\n    return True\n"), "{r:?}");
    assert!(has(&r, "def pick(xs, lo, hi):\n    while lo < hi:\n        lo = max(lo, xs[1])\n    return True\n"), "{r:?}");
    assert!(has(&r, "def pick(xs, lo, hi):\n    while lo < hi:\n        lo = min(lo, xs[0])\n    return True\n"), "{r:?}");
    assert!(has(&r, "def pick(xs, lo, hi):\n    while not (lo < hi):\n        lo = max(lo, xs[0])\n    return True\n"), "{r:?}");
    assert!(has(&r, "def pick(xs, lo, hi):\n    while lo < hi:\n        lo = max(lo, xs[0])\n    return False\n"), "{r:?}");
    assert!(has(&r, "def pick(xs, lo, hi):\n    while lo < hi:\n        lo = max(lo + 1, xs[0])\n    return True\n"), "{r:?}");
    // The function's own name and the parameters' declarations stay.
    assert!(
        r.iter()
            .all(|(t, _)| t.starts_with("def pick(xs, lo, hi):")),
        "{r:?}"
    );
}

#[test]
fn rust_and_javascript_operators() {
    let rust = "fn ok(a: i32, b: i32, c: bool) -> bool {\n    if a <= b && !c { return true; }\n    false\n}\n";
    let r = results(Language::Rust, rust);
    assert!(has(&r, &rust.replace("a <= b", "a < b")), "{r:?}");
    assert!(has(&r, &rust.replace("&&", "||")), "{r:?}");
    assert!(has(&r, &rust.replace("!c {", "c {")), "{r:?}");
    assert!(
        has(&r, &rust.replace("if a <= b && !c", "if !(a <= b && !c)")),
        "{r:?}"
    );
    assert!(
        has(&r, &rust.replace("return true", "return false")),
        "{r:?}"
    );
    let js = "function same(a, b) {\n  if (a === b) { return 1; }\n  return 0;\n}\n";
    let r = results(Language::JavaScript, js);
    assert!(has(&r, &js.replace("===", "!==")), "{r:?}");
    assert!(has(&r, &js.replace("(a === b)", "(!(a === b))")), "{r:?}");
    // No Python floor division in a language where `//` starts a comment.
    assert!(r.iter().all(|(t, _)| !t.contains("//")), "{r:?}");
}

#[test]
fn only_the_lines_given_and_cheap_kinds_first() {
    let code = "def a(x):\n    return x + 1\n\ndef b(y):\n    return y - 2\n";
    let found = mutants(Language::Python, code, (4, 5), 10_000);
    assert!(!found.is_empty());
    assert!(found.iter().all(|m| m.line == 5), "{found:?}");
    let kinds: Vec<Kind> = found.iter().map(|m| m.kind).collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(kinds, sorted);
    assert_eq!(mutants(Language::Python, code, (4, 5), 2).len(), 2);
}

#[test]
fn a_huge_range_stays_bounded() {
    // 20,000 lines of names: every kind is capped on its own.
    let mut code = String::from("def big(a, b, c, d, e, f, g, h):\n");
    for _ in 0..20_000 {
        code.push_str("    a = b + c * d - e + f + g + h\n");
    }
    let found = mutants(Language::Python, &code, (1, 20_001), 200);
    assert_eq!(found.len(), 200);
    assert!(
        found.iter().all(|m| m.kind == Kind::Operator),
        "cheapest first"
    );
}

#[test]
fn every_mutant_applies_within_the_text() {
    let code = "def f(s):\n    return s[1:] + 'é' if s else s\n";
    for m in all(Language::Python, code) {
        let changed = m.apply(code).unwrap();
        assert_ne!(changed, code, "{m:?}");
    }
    let bad = Mutant {
        start: 12,
        end: 13,
        replacement: String::new(),
        line: 1,
        what: String::new(),
        kind: Kind::Name,
    };
    // Byte 12 is inside `é` only in a text where it is; out of range is None.
    assert!(bad.apply("short").is_none());
}

#[test]
fn a_change_that_leaves_a_variable_unread_is_not_offered() {
    // QuixBugs's depth_first_search: `goalnode` for the loop's `nextnode`
    // passes its tests while answering "reachable" for any node with a
    // successor.
    let code = "def dfs(start, goal):\n    seen = set()\n    def search_from(node):\n        if node in seen:\n            return False\n        elif node is goal:\n            return True\n        else:\n            return any(search_from(nextnode) for nextnode in node.successors)\n    return search_from(start)\n";
    let r = results(Language::Python, code);
    assert!(
        !r.iter()
            .any(|(t, _)| t.contains("search_from(goal) for nextnode")),
        "{r:?}"
    );
    assert!(
        !r.iter()
            .any(|(t, _)| t.contains("search_from(node) for nextnode")),
        "{r:?}"
    );
    // A parameter read once stays read.
    let code = "def scaled(a, b):\n    return float(a) * b\n";
    let r = results(Language::Python, code);
    assert!(
        !has(&r, "def scaled(a, b):\n    return float(b) * b\n"),
        "{r:?}"
    );
    // A name read elsewhere too may still be replaced, and a called name
    // (not a variable) is no reason to drop a change.
    let code = "def ratio(a, b):\n    return g(a) / g(b) + a\n";
    let r = results(Language::Python, code);
    assert!(
        has(&r, "def ratio(a, b):\n    return g(b) / g(b) + a\n"),
        "{r:?}"
    );
    // Rust: a loop's binding.
    let code = "fn sum(xs: &[i32], k: i32) -> i32 {\n    let mut t = 0;\n    for x in xs {\n        t += x * k;\n    }\n    t\n}\n";
    let r = results(Language::Rust, code);
    assert!(!r.iter().any(|(t, _)| t.contains("t += k * k")), "{r:?}");
    assert!(!r.iter().any(|(t, _)| t.contains("t += x * x")), "{r:?}");
    assert!(r.iter().any(|(t, _)| t.contains("t -= x * k")), "{r:?}");
}

#[test]
fn a_sum_becomes_a_product() {
    // `price + quantity` for `price * quantity`: seen with the 1.5B in Emacs.
    let code = "def value(item):\n    return item.price + item.quantity\n";
    let r = results(Language::Python, code);
    assert!(
        has(
            &r,
            "def value(item):\n    return item.price * item.quantity\n"
        ),
        "{r:?}"
    );
}

#[test]
fn an_operand_is_dropped_unless_it_was_a_variables_only_read() {
    let code = "def distance(a, b):\n    if a[0] == b[0]:\n        return 1 + distance(a[1:], b[1:])\n    return len(a)\n";
    let r = results(Language::Python, code);
    assert!(has(&r, &code.replace("1 + distance", "distance")), "{r:?}");
    // Not its disguises, `1 * distance(…)` and `0 + distance(…)`.
    assert!(
        !has(&r, &code.replace("1 + distance", "1 * distance")),
        "{r:?}"
    );
    assert!(
        !has(&r, &code.replace("1 + distance", "0 + distance")),
        "{r:?}"
    );
    // A literal that is not an identity still moves.
    assert!(
        has(&r, &code.replace("1 + distance", "2 + distance")),
        "{r:?}"
    );
    let r = results(Language::Python, "def f(x):\n    return x - 1\n");
    assert!(!has(&r, "def f(x):\n    return x - 0\n"), "{r:?}");
    assert!(has(&r, "def f(x):\n    return x - 2\n"), "{r:?}");
    // `x + y` → `x` would leave `y` bound and never read.
    let code = "def total(x, y):\n    return x + y\n";
    let r = results(Language::Python, code);
    assert!(!has(&r, "def total(x, y):\n    return x\n"), "{r:?}");
    let delete = all(Language::Python, "def f(s):\n    return s.a and s.b\n");
    assert!(
        delete
            .iter()
            .any(|m| m.kind == Kind::Delete && m.replacement == "s.a"),
        "{delete:?}"
    );
}

#[test]
fn an_operand_of_a_product_is_off_by_one_in_parentheses() {
    let code = "def padded(digits):\n    return [1] + (len(digits)) * [0] + [1]\n";
    let r = results(Language::Python, code);
    assert!(
        has(&r, &code.replace("(len(digits))", "(len(digits) - 1)")),
        "{r:?}"
    );
    let code = "fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n";
    let r = results(Language::Rust, code);
    assert!(has(&r, &code.replace("w * h", "(w + 1) * h")), "{r:?}");
    // Not in a sum: `a + (b - 1)` is the literal operator's business.
    let r = results(Language::Python, "def s(a, b):\n    return a + b\n");
    assert!(!r.iter().any(|(t, _)| t.contains("(b - 1)")), "{r:?}");
}

#[test]
fn a_comparison_moves_its_operator_and_bound_together() {
    let code = "def sort(xs):\n    if len(xs) == 0:\n        return xs\n    return halves(xs)\n";
    let r = results(Language::Python, code);
    assert!(
        has(&r, &code.replace("len(xs) == 0", "len(xs) <= 1")),
        "{r:?}"
    );
    assert!(
        has(&r, &code.replace("len(xs) == 0", "len(xs) < 1")),
        "{r:?}"
    );
    let js = "function small(n) {\n  return 2 > n;\n}\n";
    let r = results(Language::JavaScript, js);
    assert!(has(&r, &js.replace("2 > n", "3 >= n")), "{r:?}");
    // A chained comparison is left alone.
    let chained = all(Language::Python, "def inside(x):\n    return 0 < x < 9\n");
    assert!(
        !chained.iter().any(|m| m.kind == Kind::Boundary),
        "{chained:?}"
    );
}

#[test]
fn an_empty_base_case_may_hold_the_empty_result() {
    let code = "def choose(xs, k):\n    if k == 0:\n        return []\n    return [[x] + rest for x in xs for rest in choose(xs, k - 1)]\n";
    let r = results(Language::Python, code);
    assert!(has(&r, &code.replace("return []", "return [[]]")), "{r:?}");
    // Only a returned empty list.
    let r = results(Language::Python, "def f():\n    xs = []\n    return xs\n");
    assert!(!r.iter().any(|(t, _)| t.contains("[[]]")), "{r:?}");
}

#[test]
fn a_method_call_is_copied_after_a_loop() {
    let code = "def chunks(text, n):\n    out = []\n    while len(text) > n:\n        piece, text = text[:n], text[n:]\n        out.append(piece)\n    return out\n";
    let r = results(Language::Python, code);
    let fixed = code.replace(
        "out.append(piece)\n    return",
        "out.append(piece)\n    out.append(text)\n    return",
    );
    assert!(has(&r, &fixed), "{r:?}");
    let insert = all(Language::Python, code);
    let m = insert
        .iter()
        .find(|m| m.apply(code).as_deref() == Some(fixed.as_str()))
        .unwrap();
    assert_eq!(m.kind, Kind::Insert);
    assert_eq!(m.what, "after line 5: `out.append(text)`");
    // Another receiver with methods called in the lines, inside a block.
    let code = "def order(tokens):\n    out = []\n    stack = []\n    for t in tokens:\n        if t > 0:\n            out.append(t)\n        else:\n            while stack:\n                out.append(stack.pop())\n    return out\n";
    let r = results(Language::Python, code);
    assert!(
        has(
            &r,
            &code.replace(
                "out.append(stack.pop())\n    return",
                "out.append(stack.pop())\n            stack.append(t)\n    return"
            )
        ),
        "{r:?}"
    );
    // Rust and JavaScript keep the statement's semicolon.
    let rust = "fn flush(xs: &[u8], out: &mut Vec<u8>, last: u8) {\n    for x in xs {\n        out.push(*x);\n    }\n}\n";
    let r = results(Language::Rust, rust);
    assert!(
        has(
            &r,
            &rust.replace("    }\n}", "    }\n    out.push(last);\n}")
        ),
        "{r:?}"
    );
    let js = "function f(xs, out, last) {\n  for (const x of xs) {\n    out.push(x);\n  }\n}\n";
    let r = results(Language::JavaScript, js);
    assert!(
        has(&r, &js.replace("  }\n}", "  }\n  out.push(last);\n}")),
        "{r:?}"
    );
}

#[test]
fn a_returned_collection_is_joined_with_another_variable() {
    let code = "def subsets(xs):\n    if xs:\n        first, *rest = xs\n        smaller = subsets(rest)\n        return [[first] + s for s in smaller]\n    return [[]]\n";
    let r = results(Language::Python, code);
    assert!(
        has(
            &r,
            &code.replace("return [[first]", "return smaller + [[first]")
        ),
        "{r:?}"
    );
    let m = all(Language::Python, code);
    assert!(
        m.iter()
            .filter(|m| m.replacement.starts_with("smaller + "))
            .all(|m| m.kind == Kind::Combine),
        "{m:?}"
    );
    // A returned name or number is not joined.
    let r = results(Language::Python, "def f(a, b):\n    return a\n");
    assert!(!r.iter().any(|(t, _)| t.contains("b + a")), "{r:?}");
}
