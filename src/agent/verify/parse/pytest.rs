//! pytest output (`-q` or not): the short summary, `E` lines, traceback
//! locations and the closing counts line. pytest 9's subtests too: a
//! `SUBFAILED[msg] (k=v) path::test - …` line names its test (a unittest
//! `subTest`'s parent is never `FAILED`), and the closing line may count
//! `N subtests passed`.

use super::{dedent, frames_in_line, num, patterns};
use crate::agent::verify::report::Builder;

patterns!(Re {
    summary = r"^(FAILED|ERROR) (\S+)(?: - (.*))?$",
    // `SUBFAILED[perimeter] (w=1, h=1) test_x.py::test_p - assert 3 == 4`,
    // `SUBFAILED(side=2) test_x.py::Case::test_s - AssertionError...`.
    sub_summary = r"^SUBFAILED(?:\[[^\]]*\])?\s*(?:\([^)]*\))?\s+(\S+::\S+)(?: - (.*))?$",
    // `____ test_name ____` or `____ ERROR collecting tests/x.py ____`.
    header = r"^_{3,} (.+?) _{3,}$",
    e_line = r"^E(?:\s|$)",
    // `tests/test_x.py:12: AssertionError` or `mathx/core.py:9: in f`.
    location = r"^(\S+\.py):(\d+): ",
    // Whole tests only: `12 subtests passed` is not counted (a failed
    // subtest is already in `failed`, pytest 9 counts it there).
    counts = r"(?:^|, )(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)\b",
    // The closing line: `3 failed, 1 passed in 0.06s`, maybe in `=` rules;
    // pytest 9 adds two-word counts (`11447 subtests passed`).
    final_line = r"^=*\s*(\d+ \w+(?: \w+)?(?:, \d+ \w+(?: \w+)?)*) in [\d.]+s(?: \([^)]*\))?\s*=*$",
});

/// The counts part of pytest's closing line, if the output has one.
pub(super) fn final_line(output: &str) -> Option<String> {
    let re = Re::get()?;
    output
        .lines()
        .rev()
        .find_map(|l| re.final_line.captures(l.trim()).map(|c| c[1].to_string()))
}

pub(super) fn parse(output: &str, b: &mut Builder) -> Option<()> {
    let re = Re::get()?;
    let mut current: Option<String> = None;
    let mut e_block: Vec<String> = Vec::new();
    for line in output.lines() {
        if !re.e_line.is_match(line) && !e_block.is_empty() {
            flush(&mut e_block, current.as_deref(), b);
        }
        if let Some(c) = re.header.captures(line) {
            current = Some(c[1].trim_start_matches("ERROR collecting ").to_string());
        } else if re.e_line.is_match(line) {
            e_block.push(line[1..].to_string());
            // `E     File "/abs/x.py", line 2` in a collection error.
            frames_in_line(line, b);
        } else if let Some(c) = re.summary.captures(line) {
            b.failing(&c[2]);
        } else if let Some(c) = re.sub_summary.captures(line) {
            b.failing(&c[1]);
        } else if let Some(c) = re.location.captures(line) {
            b.frame(&c[1], num(&c[2]), None);
        } else if line.contains("File \"") {
            frames_in_line(line, b);
        } else if line.contains("during collection") && line.contains("Interrupted") {
            b.report.build_failed = true;
        }
    }
    flush(&mut e_block, current.as_deref(), b);

    if let Some(counts) = final_line(output) {
        let mut passed = 0;
        let mut failed = 0;
        for c in re.counts.captures_iter(&counts) {
            match &c[2] {
                "passed" => passed += num(&c[1]),
                "failed" | "error" | "errors" => failed += num(&c[1]),
                _ => {}
            }
        }
        b.add_passed(passed);
        b.add_failed(failed);
    }
    Some(())
}

/// One failure's `E` lines become one message, named after its test.
fn flush(e_block: &mut Vec<String>, test: Option<&str>, b: &mut Builder) {
    if e_block.is_empty() {
        return;
    }
    let body = std::mem::take(e_block).join("\n");
    let body = dedent(&body);
    match test {
        Some(name) => b.message(&format!("{name}: {body}")),
        None => b.message(&body),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_compile() {
        assert!(super::Re::get().is_some());
    }
}
