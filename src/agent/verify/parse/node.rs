//! Node's built-in runner (`node --test`): the TAP reporter (the default
//! when output is not a terminal) and the spec reporter.

use super::{dedent, frames_in_line, num, patterns};
use crate::agent::verify::report::Builder;

patterns!(Re {
    not_ok = r"^\s*not ok \d+ - (.+?)(?: # .*)?$",
    count = r"^(?:#|ℹ) (pass|fail) (\d+)$",
    yaml_key = r"^(\s*)(error|name|failureType|stack|location): ?(.*)$",
    spec_fail = r"^(\s*)✖ (.+?)(?: \([\d.]+m?s\))?$",
    spec_suite = r"^\s*▶ (.+)$",
    error_head = r"^\s*(?:\w*Error|Error)(?: \[\w+\])?: ",
    stack_at = r"^\s+at ",
});

pub(super) fn parse(output: &str, b: &mut Builder) -> Option<()> {
    let re = Re::get()?;
    let lines: Vec<&str> = output.lines().collect();
    let mut suites: Vec<String> = Vec::new();
    // TAP: the test whose YAML block is being read.
    let mut tap_test: Option<String> = None;
    let mut tap_error: Option<String> = None;
    let mut tap_name: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(c) = re.not_ok.captures(line) {
            let name = c[1].to_string();
            b.failing(&name);
            tap_test = Some(name);
        } else if let Some(c) = re.count.captures(line) {
            match &c[1] {
                "pass" => b.add_passed(num(&c[2])),
                _ => b.add_failed(num(&c[2])),
            }
        } else if let Some(c) = re.yaml_key.captures(line) {
            let indent = c[1].len();
            let value = c[3].trim();
            match &c[2] {
                "failureType" if value.contains("subtestsFailed") => {
                    // A parent whose children failed: the children say why.
                    if let Some(name) = tap_test.take() {
                        b.remove_failing(&name);
                    }
                    tap_error = None;
                }
                "error" if tap_test.is_some() => {
                    tap_error = Some(if value == "|-" || value == "|" || value == ">-" {
                        let (text, next) = yaml_block(&lines, i, indent);
                        i = next;
                        text
                    } else {
                        unquote(value)
                    });
                }
                "name" if tap_test.is_some() => tap_name = Some(unquote(value)),
                "location" => frames_in_line(&format!(" {}", unquote(value)), b),
                _ => {}
            }
        } else if line.trim() == "..." {
            // End of a YAML block: the message is complete.
            if let (Some(test), Some(error)) = (tap_test.take(), tap_error.take()) {
                let kind = tap_name.take().filter(|n| n != "AssertionError");
                match kind {
                    Some(kind) => b.message(&format!("{test}: {kind}: {error}")),
                    None => b.message(&format!("{test}: {error}")),
                }
            }
            tap_name = None;
        } else if let Some(c) = re.spec_suite.captures(line) {
            suites.push(c[1].trim().to_string());
        } else if let Some(c) = re.spec_fail.captures(line) {
            let name = c[2].trim();
            if name == "failing tests:" || suites.iter().any(|s| s == name) {
                continue;
            }
            b.failing(name);
            // The error follows, indented deeper, up to its stack.
            let indent = c[1].len();
            let mut msg = Vec::new();
            while i < lines.len() {
                let next = lines[i];
                let deeper =
                    next.trim().is_empty() || next.len() - next.trim_start().len() > indent;
                if !deeper || re.stack_at.is_match(next) {
                    break;
                }
                if msg.is_empty() && !re.error_head.is_match(next) && !next.trim().is_empty() {
                    break;
                }
                msg.push(next);
                i += 1;
            }
            if !msg.is_empty() {
                b.message(&format!("{name}: {}", dedent(&msg.join("\n"))));
            }
        } else {
            // Stack lines, TAP (`fn (/abs/x.js:3:9)`) or spec (`at …`).
            frames_in_line(line, b);
        }
    }
    Some(())
}

/// A YAML block scalar starting at `start`: the lines indented deeper than
/// its key. Returns the text and the index of the first line after it.
fn yaml_block(lines: &[&str], start: usize, key_indent: usize) -> (String, usize) {
    let mut end = start;
    while end < lines.len() {
        let l = lines[end];
        if !l.trim().is_empty() && l.len() - l.trim_start().len() <= key_indent {
            break;
        }
        end += 1;
    }
    (dedent(&lines[start..end].join("\n")), end)
}

fn unquote(value: &str) -> String {
    let v = value.trim();
    for q in ['\'', '"'] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].replace("''", "'");
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_compile() {
        assert!(super::Re::get().is_some());
    }
}
