//! jest and vitest: their failure headers (`● Suite › name`,
//! ` FAIL  file > Suite > name`), messages, stack lines and the `Tests:`
//! counts.

use super::{dedent, frames_in_line, num, patterns};
use crate::agent::verify::report::Builder;

patterns!(Re {
    jest_header = r"^\s*● (.+)$",
    vitest_header = r"^ FAIL  (.+ > .+)$",
    // `✕ name (3 ms)` (jest), `× name 7ms` (vitest): used only when no
    // header named the failures.
    cross = r"^\s*[✕×] (.+?)(?: \(?\d+ ?m?s\)?)?$",
    jest_counts = r"^Tests:\s+(.+)$",
    vitest_counts = r"^\s+Tests\s+(\d.+)$",
    count = r"(\d+) (failed|passed)",
    // Where a message ends: jest's code frame, a stack line, vitest's
    // `❯ file:line` or its `⎯⎯` rules.
    message_end = r"^\s*(?:>?\s*\d+ \||at |❯ |⎯|● )",
});

pub(super) fn parse(output: &str, b: &mut Builder) -> Option<()> {
    let re = Re::get()?;
    let lines: Vec<&str> = output.lines().collect();
    let mut crossed = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let header = re
            .jest_header
            .captures(line)
            .or_else(|| re.vitest_header.captures(line));
        if let Some(c) = header {
            let name = c[1].trim().to_string();
            let suite_failed = name == "Test suite failed to run";
            if suite_failed {
                b.report.build_failed = true;
            } else {
                b.failing(&name);
            }
            let mut msg = Vec::new();
            while i < lines.len() && !re.message_end.is_match(lines[i]) {
                msg.push(lines[i]);
                i += 1;
            }
            let body = dedent(&msg.join("\n"));
            let body = body.trim();
            if !body.is_empty() {
                b.message(&format!("{name}: {body}"));
            }
        } else if let Some(c) = re.cross.captures(line) {
            crossed.push(c[1].to_string());
        } else if let Some(c) = re
            .jest_counts
            .captures(line)
            .or_else(|| re.vitest_counts.captures(line))
        {
            for c in re.count.captures_iter(&c[1]) {
                match &c[2] {
                    "passed" => b.add_passed(num(&c[1])),
                    _ => b.add_failed(num(&c[1])),
                }
            }
        } else {
            frames_in_line(line, b);
        }
    }
    if b.report.failing_tests.is_empty() {
        for name in crossed {
            b.failing(&name);
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_compile() {
        assert!(super::Re::get().is_some());
    }
}
