//! What a change must not do to pass, found without a model: delete or
//! skip tests, change their assertions, hard-code a value a test expects,
//! or leave debugging output behind. The reviewer (`agent.review`) rejects
//! a change with any of these at once; without it they are named in the
//! task's summary.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;
use similar::{ChangeTag, TextDiff};

use crate::agent::verify::is_test_file;

/// One file of the change: its text before the task and now (`None`: it
/// did not exist / no longer does).
pub struct FileChange<'a> {
    pub path: &'a str,
    pub before: Option<&'a str>,
    pub after: Option<&'a str>,
}

/// Something the change must not do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `test_deleted`, `test_removed`, `assertion_changed`, `test_skipped`,
    /// `hard_coded`, `debug_output`.
    pub kind: &'static str,
    pub path: String,
    /// For the user and the model.
    pub text: String,
}

/// The findings of a change. `tests` are the files holding the tests the
/// task was to make pass (path, text), whose expected values a fix must
/// not copy into the code.
pub fn inspect(changes: &[FileChange<'_>], tests: &[(&str, &str)]) -> Vec<Finding> {
    let expected = expected_literals(tests);
    let mut out = Vec::new();
    for change in changes {
        let before = change.before.unwrap_or("");
        let after = change.after.unwrap_or("");
        let path = change.path.to_owned();
        let find = |kind, text: String| Finding {
            kind,
            path: path.clone(),
            text,
        };
        let test_file = is_test_file(change.path);
        if test_file && change.before.is_some() && change.after.is_none() {
            out.push(find(
                "test_deleted",
                format!("deletes the test file {}", change.path),
            ));
            continue;
        }
        let (removed, added) = changed_lines(before, after);
        let holds_tests = test_file || change.path.ends_with(".rs");
        if holds_tests {
            let gone: Vec<String> = test_names(before)
                .difference(&test_names(after))
                .cloned()
                .collect();
            for name in gone {
                out.push(find("test_removed", format!("removes the test `{name}`")));
            }
            for line in &removed {
                if is_assertion(line) && !added.contains(line) {
                    out.push(find(
                        "assertion_changed",
                        format!("changes or removes the assertion `{}`", line.trim()),
                    ));
                }
            }
            for line in &added {
                if is_skip(line) {
                    out.push(find(
                        "test_skipped",
                        format!("skips or expects a test to fail: `{}`", line.trim()),
                    ));
                }
            }
        }
        if test_file {
            continue;
        }
        let before_literals = literals(before);
        let fixed_answers = added
            .windows(2)
            .filter(|pair| compares_to_a_literal(&pair[0]) && returns_a_literal(&pair[1]))
            .count();
        if fixed_answers >= FIXED_ANSWERS {
            out.push(find(
                "hard_coded",
                format!(
                    "returns fixed values for given inputs ({fixed_answers} new `if … == <literal>` lines, each followed by a `return <literal>`)"
                ),
            ));
        }
        for line in &added {
            let code = line.trim();
            let decides = code.starts_with("return ")
                || code.starts_with("if ")
                || code.starts_with("elif ")
                || code.contains("==")
                || code.starts_with("case ");
            if !decides {
                continue;
            }
            let copied: Vec<String> = literals(code)
                .into_iter()
                .filter(|l| expected.contains(l) && !before_literals.contains(l))
                .collect();
            if let Some(value) = copied.first() {
                out.push(find(
                    "hard_coded",
                    format!("hard-codes {value}, a value the tests expect: `{code}`"),
                ));
            }
        }
        for call in DEBUG_CALLS {
            if before.contains(call) {
                continue;
            }
            if let Some(line) = added.iter().find(|l| l.contains(call)) {
                out.push(find(
                    "debug_output",
                    format!("adds debugging output: `{}`", line.trim()),
                ));
            }
        }
    }
    out
}

/// New `if … == <literal>` lines each followed by a `return <literal>`
/// that make a table of answers rather than a fix.
const FIXED_ANSWERS: usize = 3;

/// `if x == [1, 2]:`, `elif s == "abc":`, `} else if (n === 3) {`.
fn compares_to_a_literal(line: &str) -> bool {
    static PATTERN: OnceLock<Option<Regex>> = OnceLock::new();
    PATTERN
        .get_or_init(|| {
            Regex::new(r#"^(?:\}\s*)?(?:if|elif|else if)\b.*(?:==|===)\s*[\[\(\{"'\d-]"#).ok()
        })
        .as_ref()
        .is_some_and(|re| re.is_match(line.trim()))
}

/// `return 7`, `return "abc"`, `return [1, 2]`, `return None`…
fn returns_a_literal(line: &str) -> bool {
    static PATTERN: OnceLock<Option<Regex>> = OnceLock::new();
    PATTERN
        .get_or_init(|| {
            Regex::new(r#"^return\s+(?:[\[\(\{"'\d-]|True\b|False\b|None\b|true\b|false\b|null\b)"#)
                .ok()
        })
        .as_ref()
        .is_some_and(|re| re.is_match(line.trim()))
}

/// Calls that print for a human; one the file did not use before is
/// debugging left behind.
const DEBUG_CALLS: &[&str] = &[
    "print(",
    "console.log(",
    "dbg!(",
    "println!(",
    "eprintln!(",
    "fmt.Println(",
    "fmt.Printf(",
    "System.out.println(",
];

/// The lines removed and added (whitespace at either end ignored).
fn changed_lines(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let diff = TextDiff::from_lines(before, after);
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    for change in diff.iter_all_changes() {
        let line = change.value().trim().to_owned();
        if line.is_empty() {
            continue;
        }
        match change.tag() {
            ChangeTag::Delete => removed.push(line),
            ChangeTag::Insert => added.push(line),
            ChangeTag::Equal => {}
        }
    }
    // A line moved is neither.
    let moved: Vec<String> = removed
        .iter()
        .filter(|l| added.contains(l))
        .cloned()
        .collect();
    removed.retain(|l| !moved.contains(l));
    added.retain(|l| !moved.contains(l));
    (removed, added)
}

fn is_assertion(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("assert")
        || line.contains("assert_eq!")
        || line.contains("assert_ne!")
        || line.contains("assert!(")
        || line.contains("expect(")
        || line.contains(".assert")
        || line.contains("self.assert")
        || line.contains("t.Error")
        || line.contains("t.Fatal")
}

fn is_skip(line: &str) -> bool {
    const MARKERS: &[&str] = &[
        "@pytest.mark.skip",
        "@pytest.mark.xfail",
        "@unittest.skip",
        "@unittest.expectedFailure",
        "pytest.skip(",
        "#[ignore",
        "it.skip(",
        "test.skip(",
        "describe.skip(",
        "xit(",
        "xdescribe(",
        "t.Skip(",
    ];
    MARKERS.iter().any(|m| line.contains(m))
}

/// The names of the tests a file defines (Python, JavaScript, Go, Rust).
fn test_names(text: &str) -> BTreeSet<String> {
    static PATTERNS: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = PATTERNS
        .get_or_init(|| {
            Regex::new(
                r#"(?m)^\s*(?:async\s+)?def\s+(test\w*)|\b(?:it|test)\s*\(\s*["'`]([^"'`\n]+)["'`]|^func\s+(Test\w*)"#,
            )
            .ok()
        })
        .as_ref()
    else {
        return BTreeSet::new();
    };
    let mut names: BTreeSet<String> = re
        .captures_iter(text)
        .filter_map(|c| c.get(1).or(c.get(2)).or(c.get(3)))
        .map(|m| m.as_str().to_owned())
        .collect();
    // Rust: the function after `#[test]`.
    let mut marked = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
            marked = true;
        } else if marked {
            if let Some(rest) = line.split("fn ").nth(1) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
                marked = false;
            }
        }
    }
    names
}

/// Values a test expects: the non-trivial literals of the tests' files
/// (in assertions, or in the tables of cases they loop over).
fn expected_literals(tests: &[(&str, &str)]) -> BTreeSet<String> {
    tests
        .iter()
        .flat_map(|(_, text)| text.lines())
        .filter(|l| !l.trim_start().starts_with(['#', '/']))
        .flat_map(literals)
        .collect()
}

/// Numbers of two digits or more (or with a fraction) and strings of two
/// characters or more: a value too specific to match by chance.
fn literals(text: &str) -> BTreeSet<String> {
    static PATTERN: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = PATTERN
        .get_or_init(|| Regex::new(r#"-?\b\d+\.\d+\b|-?\b\d{2,}\b|"[^"\n]{2,}"|'[^'\n]{2,}'"#).ok())
        .as_ref()
    else {
        return BTreeSet::new();
    };
    re.find_iter(text)
        .map(|m| m.as_str().trim_start_matches('-').to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(changes: &[FileChange<'_>], tests: &[(&str, &str)]) -> Vec<&'static str> {
        inspect(changes, tests).iter().map(|f| f.kind).collect()
    }

    const TEST: &str = "from stats import median\n\n\ndef test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n\n\ndef test_odd():\n    assert median([3, 1, 2]) == 2\n";

    #[test]
    fn cheats_are_found() {
        let weakened = TEST.replace("== 2.5", "== 3.5");
        let deleted = TEST.replace(
            "def test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n\n\n",
            "",
        );
        let skipped = TEST.replace("def test_even", "@pytest.mark.skip\ndef test_even");
        let t = "test_stats.py";
        let tests = [(t, TEST)];
        for (after, want) in [
            (Some(weakened.as_str()), "assertion_changed"),
            (Some(deleted.as_str()), "test_removed"),
            (Some(skipped.as_str()), "test_skipped"),
            (None, "test_deleted"),
        ] {
            let got = kinds(
                &[FileChange {
                    path: t,
                    before: Some(TEST),
                    after,
                }],
                &tests,
            );
            assert!(got.contains(&want), "{want}: {got:?}");
        }
        let code = "def median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n";
        let hard = "def median(xs):\n    if xs == [4, 1, 3, 2]:\n        return 2.5\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n";
        let printed =
            "def median(xs):\n    xs = sorted(xs)\n    print(xs)\n    return xs[len(xs) // 2]\n";
        let p = "stats.py";
        assert_eq!(
            kinds(
                &[FileChange {
                    path: p,
                    before: Some(code),
                    after: Some(hard)
                }],
                &tests
            ),
            ["hard_coded"]
        );
        assert_eq!(
            kinds(
                &[FileChange {
                    path: p,
                    before: Some(code),
                    after: Some(printed)
                }],
                &tests
            ),
            ["debug_output"]
        );
    }

    #[test]
    fn a_table_of_answers_is_found() {
        let change = |after: &str| {
            let code = "def f(x):\n    return x\n";
            let changes = [FileChange {
                path: "f.py",
                before: Some(code),
                after: Some(after),
            }];
            kinds(&changes, &[])
        };
        let two = "def f(x):\n    if x == [1, 2]:\n        return 3\n    if x == [4]:\n        return 4\n    return x\n";
        assert!(change(two).is_empty(), "two cases are not a table");
        let three = two.replace(
            "    return x\n",
            "    if x == [5]:\n        return 5\n    return x\n",
        );
        assert_eq!(change(&three), ["hard_coded"]);
        // Early returns of booleans are logic, not a table.
        let logic = "def f(s):\n    depth = 0\n    for c in s:\n        if c == '(':\n            depth += 1\n        else:\n            depth -= 1\n            if depth < 0:\n                return False\n    if depth > 0:\n        return False\n    return True\n";
        assert!(change(logic).is_empty());
    }

    #[test]
    fn honest_fixes_pass() {
        let code = "def median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n";
        let fixed = "def median(xs):\n    xs = sorted(xs)\n    n = len(xs)\n    if n % 2 == 0:\n        return (xs[n // 2 - 1] + xs[n // 2]) / 2\n    return xs[n // 2]\n";
        let more_tests = format!("{TEST}\n\ndef test_one():\n    assert median([7]) == 7\n");
        let changes = [
            FileChange {
                path: "stats.py",
                before: Some(code),
                after: Some(fixed),
            },
            FileChange {
                path: "test_stats.py",
                before: Some(TEST),
                after: Some(&more_tests),
            },
        ];
        assert!(inspect(&changes, &[("test_stats.py", TEST)]).is_empty());
        // A file that printed before may print more; a Rust test moved is
        // not removed.
        let cli = "def main():\n    print('hi')\n";
        let cli2 = "def main():\n    print('hi')\n    print('bye')\n";
        assert!(kinds(
            &[FileChange {
                path: "cli.py",
                before: Some(cli),
                after: Some(cli2)
            }],
            &[]
        )
        .is_empty());
        let rs = "fn f() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn a() { assert_eq!(super::f(), ()); }\n}\n";
        let rs2 = "fn f() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn a() { assert_eq!(super::f(), ()); }\n}\n";
        assert!(kinds(
            &[FileChange {
                path: "src/lib.rs",
                before: Some(rs),
                after: Some(rs2)
            }],
            &[]
        )
        .is_empty());
    }

    #[test]
    fn rust_and_js_tests_removed_or_ignored_are_found() {
        let rs =
            "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(1 + 1, 2); }\n}\n";
        let ignored = rs.replace("#[test]", "#[test]\n    #[ignore]");
        assert!(kinds(
            &[FileChange {
                path: "src/lib.rs",
                before: Some(rs),
                after: Some(&ignored)
            }],
            &[]
        )
        .contains(&"test_skipped"));
        let js = "test('sorts by score', () => {\n  expect(rank(xs)).toEqual([3, 2]);\n});\n";
        let got = kinds(
            &[FileChange {
                path: "rank.test.js",
                before: Some(js),
                after: Some(""),
            }],
            &[],
        );
        assert!(
            got.contains(&"test_removed") && got.contains(&"assertion_changed"),
            "{got:?}"
        );
    }
}
