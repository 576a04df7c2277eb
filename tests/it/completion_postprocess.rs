#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Golden tests for completion postprocessing: every file under
//! `tests/fixtures/completion/postprocess/` is one case.
//!
//! Fixture format (sections start with `--- `; a section's text is its lines
//! joined with `\n`, without the final newline):
//! ```text
//! --- document (█ is the cursor)
//! ...
//! --- output            (or `--- output json` with one JSON string, for exact whitespace)
//! ...
//! --- mode
//! single | multi [max_lines]   [crlf]  (crlf: the document's lines end in \r\n)
//! --- expected
//! text: "json string"
//! replace: N
//! (or `rejected: Name`)
//! ```

use std::path::Path;

use fettle::completion::postprocess::{postprocess, IndentStyle, Input, Rejected};

const CURSOR: char = '█';

struct Case {
    document: String,
    output: String,
    multiline: bool,
    max_lines: usize,
    expected: Result<(String, usize), String>,
}

fn parse(text: &str) -> Result<Case, String> {
    let mut sections: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("--- ") {
            sections.push((header.to_string(), Vec::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push(line);
        } else {
            return Err(format!("text before the first section: {line:?}"));
        }
    }
    let section = |name: &str| {
        sections
            .iter()
            .find(|(h, _)| h.split_whitespace().next() == Some(name))
            .ok_or(format!("missing section {name}"))
    };
    let (_, doc) = section("document")?;
    let (mode_header, mode) = section("mode")?;
    let _ = mode_header;
    let mode = mode.join(" ");
    let words: Vec<&str> = mode.split_whitespace().collect();
    let crlf = words.contains(&"crlf");
    let document = if crlf {
        doc.join("\r\n")
    } else {
        doc.join("\n")
    };
    let (out_header, out) = section("output")?;
    let output = if out_header.contains("json") {
        serde_json::from_str::<String>(&out.join("\n")).map_err(|e| format!("output json: {e}"))?
    } else {
        out.join("\n")
    };
    let multiline = match words.first() {
        Some(&"single") => false,
        Some(&"multi") => true,
        other => return Err(format!("bad mode {other:?}")),
    };
    let max_lines = words
        .get(1)
        .and_then(|w| w.parse().ok())
        .unwrap_or(if multiline { 20 } else { 1 });
    let (_, exp) = section("expected")?;
    let mut text = None;
    let mut replace = 0usize;
    let mut rejected = None;
    for line in exp {
        if let Some(v) = line.strip_prefix("text: ") {
            text = Some(serde_json::from_str::<String>(v).map_err(|e| format!("text json: {e}"))?);
        } else if let Some(v) = line.strip_prefix("replace: ") {
            replace = v.trim().parse().map_err(|e| format!("replace: {e}"))?;
        } else if let Some(v) = line.strip_prefix("rejected: ") {
            rejected = Some(v.trim().to_string());
        } else if !line.trim().is_empty() {
            return Err(format!("bad expected line {line:?}"));
        }
    }
    let expected = match (text, rejected) {
        (Some(t), None) => Ok((t, replace)),
        (None, Some(r)) => Err(r),
        _ => return Err("expected needs exactly one of text/rejected".into()),
    };
    Ok(Case {
        document,
        output,
        multiline,
        max_lines,
        expected,
    })
}

fn run(case: &Case) -> Result<(String, usize), String> {
    let cursor = case
        .document
        .find(CURSOR)
        .expect("document has no cursor marker");
    let before = &case.document[..cursor];
    let after = &case.document[cursor + CURSOR.len_utf8()..];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let (line_suffix, following) = match after.find('\n') {
        Some(i) => (&after[..i], &after[i + 1..]),
        None => (after, ""),
    };
    let whole = format!("{before}{after}");
    let input = Input {
        raw: &case.output,
        line_prefix: &before[line_start..],
        line_suffix,
        following,
        preceding: &before[..line_start],
        indent: IndentStyle::detect(&whole),
        multiline: case.multiline,
        max_lines: case.max_lines,
    };
    postprocess(&input)
        .map(|c| (c.text, c.replace_suffix_bytes))
        .map_err(|r| format!("{r:?}"))
}

#[test]
fn golden_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/completion/postprocess");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    entries.sort();
    assert!(entries.len() >= 40, "only {} fixtures", entries.len());
    let mut failures = Vec::new();
    for path in &entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(path).expect("read fixture");
        let case = match parse(&text) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{name}: bad fixture: {e}"));
                continue;
            }
        };
        let got = run(&case);
        if got != case.expected {
            failures.push(format!(
                "{name}:\n  expected {:?}\n  got      {:?}",
                case.expected, got
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}

#[test]
fn indent_style_detection() {
    assert_eq!(IndentStyle::detect(""), IndentStyle::Spaces(4));
    assert_eq!(
        IndentStyle::detect("fn a() {\n\tx();\n\tif y {\n\t\tz();\n\t}\n}\n"),
        IndentStyle::Tabs
    );
    assert_eq!(
        IndentStyle::detect("function a() {\n  x();\n  if (y) {\n    z();\n  }\n}\n"),
        IndentStyle::Spaces(2)
    );
    assert_eq!(
        IndentStyle::detect("def a():\n    x()\n    if y:\n        z()\n"),
        IndentStyle::Spaces(4)
    );
    // Doc-comment continuation lines do not make it one-space indented.
    assert_eq!(
        IndentStyle::detect("/**\n * doc\n */\nint f() {\n    return 1;\n}\n"),
        IndentStyle::Spaces(4)
    );
}

#[test]
fn rejection_reasons_are_distinct() {
    let all = [
        Rejected::Empty,
        Rejected::WhitespaceOnly,
        Rejected::Tiny,
        Rejected::RepeatsNextLine,
        Rejected::RepeatsSuffix,
        Rejected::Fenced,
        Rejected::Other,
    ];
    let reasons: std::collections::HashSet<_> = all.iter().map(|r| r.reason()).collect();
    assert_eq!(reasons.len(), all.len());
}

#[test]
fn long_output_is_fast_enough() {
    // A 2 KB looping output: must not blow up (quadratic paths are bounded).
    let raw = "x = foo(a, b);\n".repeat(150);
    let input = Input {
        raw: &raw,
        line_prefix: "",
        line_suffix: "",
        following: "y = 1;\n",
        preceding: "",
        indent: IndentStyle::Spaces(4),
        multiline: true,
        max_lines: 200,
    };
    let started = std::time::Instant::now();
    let got = postprocess(&input).unwrap();
    assert_eq!(got.text, "x = foo(a, b);");
    assert!(started.elapsed() < std::time::Duration::from_millis(50));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// Arbitrary output and context (brackets, quotes, CJK, emoji, CR, tabs):
    /// never panics; the replaced bytes are a char-boundary prefix of the suffix;
    /// the text is never blank and has no trailing whitespace.
    #[test]
    fn never_panics_and_replace_is_in_suffix(
        raw in "[a-z ()\\[\\]{}\"'`;:,\n\r\t界🎉<>/think`]{0,60}",
        prefix in "[a-z (\\[{\"'\t界]{0,12}",
        suffix in "[a-z )\\]}\"';,界\r]{0,8}",
        following in "[a-z (){}\n\t ]{0,30}",
        multiline in proptest::bool::ANY,
        max_lines in 0usize..6,
        tabs in proptest::bool::ANY,
    ) {
        let input = Input {
            raw: &raw,
            line_prefix: &prefix,
            line_suffix: &suffix,
            following: &following,
            preceding: "",
            indent: if tabs { IndentStyle::Tabs } else { IndentStyle::Spaces(2) },
            multiline,
            max_lines,
        };
        if let Ok(c) = postprocess(&input) {
            let s = suffix.strip_suffix('\r').unwrap_or(&suffix);
            proptest::prop_assert!(c.replace_suffix_bytes <= s.len());
            proptest::prop_assert!(s.is_char_boundary(c.replace_suffix_bytes));
            proptest::prop_assert!(!c.text.trim().is_empty());
            proptest::prop_assert_eq!(c.text.trim_end(), c.text.as_str());
            if !multiline {
                proptest::prop_assert!(c.text.matches('\n').count() <= 1);
            }
        }
    }
}
