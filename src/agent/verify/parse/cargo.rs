//! `cargo test` / libtest output, and rustc's errors when the build fails.

use super::{num, patterns};
use crate::agent::verify::report::Builder;

patterns!(Re {
    test_failed = r"^test (.+) \.\.\. FAILED$",
    section = r"^---- (.+) stdout ----$",
    // Rust ≥ 1.73: `thread 'name' (123) panicked at src/x.rs:1:2:` with the
    // message on the next lines; the thread id is new in 1.87.
    panicked = r"^thread '([^']*)'(?: \(\d+\))? panicked at (.+?):(\d+):(\d+):$",
    // Older: `thread 'name' panicked at 'message', src/x.rs:1:2`.
    panicked_old = r"^thread '([^']*)'(?: \(\d+\))? panicked at '(.*)', (.+?):(\d+):(\d+)$",
    backtrace_at = r"^\s+at (.+?):(\d+):(\d+)$",
    result = r"^test result: \w+\. (\d+) passed; (\d+) failed;",
    error = r"^error(\[E\d+\])?: (.+)$",
    arrow = r"^\s*--> (.+?):(\d+):(\d+)$",
    // A primary label: `   |     ^^^^^^ expected `String`, found `u32``.
    label = r"^\s*\d*\s*\|[\s|]*\^+\s+(.+)$",
});

/// rustc/cargo summary lines that are not diagnostics of their own.
fn is_error_summary(text: &str) -> bool {
    [
        "could not compile",
        "test failed",
        "aborting due to",
        "build failed",
    ]
    .iter()
    .any(|s| text.starts_with(s))
        || text.contains("targets failed")
}

enum Block {
    None,
    /// A compile error being read: its lines so far.
    Error(Vec<String>),
    Warning,
}

pub(super) fn parse(output: &str, b: &mut Builder) -> Option<()> {
    let re = Re::get()?;
    let lines: Vec<&str> = output.lines().collect();
    let mut block = Block::None;
    // Distinct errors: cargo repeats a crate's errors for each target
    // (`lib` and `lib test`) it fails to build.
    let mut errors = Vec::new();
    let mut saw_result = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;

        // Compile diagnostics come first, in blocks that run until the next
        // line starting with a word (their source snippets start with a
        // space, a line number or `|`), other than their own `help:` and
        // `note:` parts.
        let starts_item = line.starts_with(|c: char| c.is_ascii_alphabetic());
        if starts_item && !line.starts_with("help") && !line.starts_with("note") {
            if let Block::Error(lines) = std::mem::replace(&mut block, Block::None) {
                finish_error(lines, &mut errors, b);
            }
            if let Some(c) = re.error.captures(line) {
                if !is_error_summary(&c[2]) {
                    block = Block::Error(vec![line.to_string()]);
                }
            } else if line.starts_with("warning") {
                block = Block::Warning;
            }
        }
        if let Block::Error(ref mut msg) = block {
            if let Some(c) = re.arrow.captures(line) {
                b.frame(&c[1], num(&c[2]), Some(num(&c[3])));
                if msg.len() == 1 {
                    msg.push(format!("  --> {}:{}:{}", &c[1], &c[2], &c[3]));
                }
            } else if let Some(c) = re.label.captures(line) {
                msg.push(format!("  {}", &c[1]));
            }
            continue;
        }
        if matches!(block, Block::Warning) {
            continue;
        }

        if let Some(c) = re.test_failed.captures(line) {
            b.failing(&c[1]);
        } else if let Some(c) = re.section.captures(line) {
            b.failing(&c[1]);
        } else if let Some(c) = re.panicked.captures(line) {
            b.frame(&c[2], num(&c[3]), Some(num(&c[4])));
            // The message runs until the backtrace note or a blank line.
            let mut msg = vec![format!("{} panicked: ", &c[1])];
            while i < lines.len() {
                let next = lines[i];
                if next.is_empty()
                    || next.starts_with("note: ")
                    || next.starts_with("stack backtrace:")
                    || next.starts_with("thread '")
                {
                    break;
                }
                msg.push(next.to_string());
                i += 1;
            }
            let joined = format!("{}{}", msg[0], msg[1..].join("\n"));
            b.message(&joined);
        } else if let Some(c) = re.panicked_old.captures(line) {
            b.frame(&c[3], num(&c[4]), Some(num(&c[5])));
            b.message(&format!("{} panicked: {}", &c[1], &c[2]));
        } else if let Some(c) = re.backtrace_at.captures(line) {
            b.frame(&c[1], num(&c[2]), Some(num(&c[3])));
        } else if let Some(c) = re.result.captures(line) {
            saw_result = true;
            b.add_passed(num(&c[1]));
            b.add_failed(num(&c[2]));
        }
    }
    if let Block::Error(lines) = block {
        finish_error(lines, &mut errors, b);
    }
    let errors = u32::try_from(errors.len()).unwrap_or(u32::MAX);
    if errors > 0 {
        b.report.build_failed = true;
        if !saw_result {
            b.add_failed(errors);
        }
    }
    Some(())
}

fn finish_error(lines: Vec<String>, errors: &mut Vec<String>, b: &mut Builder) {
    let text = lines.join("\n");
    if !errors.contains(&text) {
        b.message(&text);
        errors.push(text);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_compile() {
        assert!(super::Re::get().is_some());
    }
}
