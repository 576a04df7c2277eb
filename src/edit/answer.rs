//! From the model's answer to the replacement text: the one fenced code
//! block (prose, `<think>` blocks and chat preambles ignored), indented like
//! the document, with the selection's trailing newline, and without lines it
//! repeated from just outside the selection.

/// What the answer is fitted to.
pub struct Fit<'a> {
    /// The selected text being replaced.
    pub selection: &'a str,
    /// Whether the selection starts at the start of a line (so indentation
    /// is the document's business, not the model's).
    pub line_start: bool,
    /// Up to three lines just before and just after the selection.
    pub before: Vec<&'a str>,
    pub after: Vec<&'a str>,
    /// The `fettle:` comment the instruction came from, removed from the
    /// answer if the model kept it.
    pub instruction_comment: Option<&'a str>,
}

/// The code in `answer`, or `None` when there is none (an empty answer,
/// only thinking, only prose).
pub fn extract_code(answer: &str) -> Option<String> {
    let answer = strip_thinking(answer)?;
    let answer = answer.replace("\r\n", "\n");
    if let Some(code) = first_fenced_block(&answer) {
        return Some(code);
    }
    // No fence: a model that answered with bare code. Drop a chat preamble.
    let mut lines: Vec<&str> = answer.lines().collect();
    while lines
        .first()
        .is_some_and(|l| l.trim().is_empty() || is_preamble(l))
    {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    if lines.is_empty() {
        return None;
    }
    Some(lines.join("\n") + "\n")
}

/// Whether `answer` holds a fenced code block: without one, what
/// [`extract_code`] returns may be prose taken for bare code.
pub fn has_fenced_block(answer: &str) -> bool {
    strip_thinking(answer).is_some_and(|a| first_fenced_block(&a.replace("\r\n", "\n")).is_some())
}

/// The answer without `<think>…</think>` blocks; `None` when the thinking
/// never ended (the answer was cut off before any code).
fn strip_thinking(answer: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = answer;
    while let Some(open) = rest.find("<think>") {
        out.push_str(&rest[..open]);
        let after = &rest[open + "<think>".len()..];
        let close = after.find("</think>")?;
        rest = &after[close + "</think>".len()..];
    }
    out.push_str(rest);
    Some(out)
}

/// The first fenced block (``` or ~~~, three or more, any info string); an
/// unclosed block runs to the end (a cut-off stream).
fn first_fenced_block(text: &str) -> Option<String> {
    let mut lines = text.split_inclusive('\n');
    let (fence_char, fence_len) = loop {
        let line = lines.next()?;
        if let Some(fence) = fence_of(line) {
            break fence;
        }
    };
    let mut code = String::new();
    let closing: String = std::iter::repeat_n(fence_char, fence_len).collect();
    for line in lines {
        if let Some((c, n)) = fence_of(line) {
            let bare = line.trim().chars().all(|x| x == c);
            if c == fence_char && n >= fence_len && bare {
                return Some(code);
            }
        }
        // A fence closed at the end of a code line (`return x```).
        if let Some(body) = line.trim_end().strip_suffix(closing.as_str()) {
            if !body.trim().is_empty() && !body.ends_with(fence_char) {
                code.push_str(body);
                code.push('\n');
                return Some(code);
            }
        }
        code.push_str(line);
    }
    Some(code)
}

fn fence_of(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start();
    let c = trimmed.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = trimmed.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

fn is_preamble(line: &str) -> bool {
    let lower = line.trim().to_lowercase();
    const OPENERS: &[&str] = &[
        "here",
        "sure",
        "certainly",
        "okay",
        "ok,",
        "of course",
        "below",
        "the updated",
        "the rewritten",
        "the new",
        "this is",
    ];
    OPENERS.iter().any(|o| lower.starts_with(o)) && !lower.contains('(') && !lower.contains('=')
}

/// Fits extracted `code` to the document: repeated context lines trimmed,
/// the instruction comment dropped, indentation and line endings made the
/// document's, the trailing newline made the selection's.
pub fn fit(code: &str, fit: &Fit<'_>) -> String {
    let mut lines: Vec<String> = code
        .replace("\r\n", "\n")
        .lines()
        .map(str::to_owned)
        .collect();
    trim_repeated_context(&mut lines, fit);
    if let Some(comment) = fit.instruction_comment {
        drop_instruction_comment(&mut lines, comment);
    }
    let selection_starts_blank = fit
        .selection
        .lines()
        .next()
        .is_some_and(|l| l.trim().is_empty());
    while !selection_starts_blank && lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    if fit.line_start {
        reindent(&mut lines, fit.selection);
    } else if let Some(first) = lines.first_mut() {
        // A selection inside a line: its first line continues the document's.
        *first = first.trim_start().to_owned();
    }
    let crlf = fit.selection.contains("\r\n");
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut out = lines.join(eol);
    let selection_body = fit.selection.trim_end_matches(['\n', '\r']);
    let trailing = &fit.selection[selection_body.len()..];
    if !out.is_empty() || !trailing.is_empty() {
        out.push_str(trailing);
    }
    out
}

/// Drops leading lines that repeat the lines just before the selection,
/// and trailing lines that repeat the lines just after it (models often
/// return the function's signature or closing brace along with the body).
fn trim_repeated_context(lines: &mut Vec<String>, fit: &Fit<'_>) {
    let same = |a: &str, b: &str| a.trim_end() == b.trim_end();
    // A run of blank lines alone proves nothing.
    let telling = |run: &[&str]| run.iter().any(|l| !l.trim().is_empty());
    let selection: Vec<&str> = fit.selection.lines().collect();
    for k in (1..=fit.before.len().min(lines.len())).rev() {
        let tail = &fit.before[fit.before.len() - k..];
        let repeats = telling(tail) && lines[..k].iter().zip(tail).all(|(a, b)| same(a, b));
        // Unless the selection itself starts that way.
        let own = selection.len() >= k && selection[..k].iter().zip(tail).all(|(a, b)| same(a, b));
        if repeats && !own {
            lines.drain(..k);
            break;
        }
    }
    for k in (1..=fit.after.len().min(lines.len())).rev() {
        let head = &fit.after[..k];
        let start = lines.len() - k;
        let repeats = telling(head) && lines[start..].iter().zip(head).all(|(a, b)| same(a, b));
        let own = selection.len() >= k
            && selection[selection.len() - k..]
                .iter()
                .zip(head)
                .all(|(a, b)| same(a, b));
        if repeats && !own {
            lines.truncate(start);
            break;
        }
    }
}

fn drop_instruction_comment(lines: &mut Vec<String>, comment: &str) {
    let comment = comment.trim();
    lines.retain_mut(|line| {
        let Some(at) = line.find(comment) else {
            return true;
        };
        let before = line[..at].trim_end().len();
        let rest = line[at + comment.len()..].to_owned();
        line.truncate(before);
        line.push_str(&rest);
        !line.trim().is_empty()
    });
}

/// Re-indents `lines` so their common indentation is the selection's, in
/// the document's style (tabs or spaces).
fn reindent(lines: &mut [String], selection: &str) {
    let indent_of = |l: &str| l.len() - l.trim_start_matches([' ', '\t']).len();
    let nonblank = |l: &&str| !l.trim().is_empty();
    let selection_lines: Vec<&str> = selection.lines().filter(nonblank).collect();
    let base: String = selection_lines
        .iter()
        .min_by_key(|l| indent_of(l))
        .map(|l| l[..indent_of(l)].to_owned())
        .unwrap_or_default();
    let tabs = selection_lines.iter().any(|l| l.starts_with('\t'));
    let width = indent_width(&selection_lines).unwrap_or(4);
    // The answer's indentation in the document's style first.
    for line in lines.iter_mut() {
        let n = indent_of(line);
        let indentation = &line[..n];
        let converted = if tabs && !indentation.contains('\t') && n >= width {
            "\t".repeat(n / width) + &" ".repeat(n % width)
        } else if !tabs && indentation.contains('\t') {
            indentation.replace('\t', &" ".repeat(width))
        } else {
            continue;
        };
        *line = converted + &line[n..];
    }
    let common = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent_of(l))
        .min()
        .unwrap_or(0);
    for line in lines.iter_mut() {
        if line.trim().is_empty() {
            line.clear();
        } else {
            *line = format!("{base}{}", &line[common..]);
        }
    }
}

/// The indentation step of space-indented lines: the smallest positive
/// difference between indentation levels.
fn indent_width(lines: &[&str]) -> Option<usize> {
    let mut levels: Vec<usize> = lines
        .iter()
        .filter(|l| !l.starts_with('\t'))
        .map(|l| l.len() - l.trim_start_matches(' ').len())
        .collect();
    levels.sort_unstable();
    levels.dedup();
    levels
        .windows(2)
        .map(|w| w[1] - w[0])
        .chain(levels.first().copied().filter(|n| *n > 0))
        .filter(|d| (2..=8).contains(d))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_of_both_kinds_and_unclosed_blocks() {
        assert_eq!(
            extract_code("Sure:\n~~~py\nx = 1\n~~~\n").as_deref(),
            Some("x = 1\n")
        );
        assert_eq!(extract_code("```\nx = 1\ny").as_deref(), Some("x = 1\ny"));
        assert_eq!(extract_code("<think>hmm"), None);
        assert_eq!(extract_code("  \n"), None);
    }
}
