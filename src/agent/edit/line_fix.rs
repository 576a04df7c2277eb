//! "Which line is wrong, and what should it be": a small model's cheapest
//! useful answer — a dozen tokens where a whole function costs hundreds, so
//! a candidate search can sample many of them. The answer names the line
//! as `WRONG: …` and its correction as `FIXED: …`. Models quote loosely —
//! in backticks or a fence, unindented, two lines joined
//! (`if k == 0: return []`) — so the quote is found blind to whitespace
//! and only what differs between the two quotes changes in the file;
//! everything else keeps its bytes.

/// One `WRONG:`/`FIXED:` pair of an answer, unquoted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineFix {
    pub wrong: String,
    pub fixed: String,
}

/// Why a [`LineFix`] could not become an edit (for the model's next message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoLineFix {
    /// The two quotes are the same code.
    Unchanged,
    /// The wrong line is not in the file.
    NotFound,
    /// It is there more than once (and no preferred range decides).
    Ambiguous(usize),
    /// The change would join or split lines of the file.
    SpansLines,
}

impl std::fmt::Display for NoLineFix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoLineFix::Unchanged => write!(f, "the FIXED line is the WRONG line again"),
            NoLineFix::NotFound => write!(f, "the WRONG line is not in the code"),
            NoLineFix::Ambiguous(n) => write!(f, "the WRONG line is in the code {n} times"),
            NoLineFix::SpansLines => write!(
                f,
                "the change reaches over more than one line (answer with the whole function instead)"
            ),
        }
    }
}

/// The whole lines an edit replaces, and what replaces them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineEdit {
    pub search: String,
    pub replace: String,
    /// 1-based line of the change.
    pub line: usize,
}

const WRONG: &str = "WRONG:";
const FIXED: &str = "FIXED:";

/// The `WRONG:`/`FIXED:` pairs of `answer`, in order (labels in any case,
/// bold or not); empty when it has none.
pub fn line_fixes(answer: &str) -> Vec<LineFix> {
    // ASCII upper-casing keeps every byte offset.
    let upper = answer.to_ascii_uppercase();
    let mut labels: Vec<(usize, bool)> = upper
        .match_indices(WRONG)
        .map(|(i, _)| (i, true))
        .chain(upper.match_indices(FIXED).map(|(i, _)| (i, false)))
        .collect();
    labels.sort_unstable();
    let mut out = Vec::new();
    for (k, pair) in labels.windows(2).enumerate() {
        let [(w, true), (f, false)] = *pair else {
            continue;
        };
        let end = labels.get(k + 2).map_or(answer.len(), |&(i, _)| i);
        let wrong = unquote(&answer[w + WRONG.len()..f]);
        let fixed = unquote(&answer[f + FIXED.len()..end]);
        if !wrong.trim().is_empty() && !fixed.trim().is_empty() {
            out.push(LineFix { wrong, fixed });
        }
        if out.len() == MAX_PAIRS {
            break;
        }
    }
    out
}

/// Pairs taken from one answer at most (each is searched for in files).
const MAX_PAIRS: usize = 8;

/// The code a label's text quotes: a fence's body, a backtick span, or the
/// first line (what follows is the model's explanation).
fn unquote(text: &str) -> String {
    let text = text.trim_start_matches(['*', ' ', '\t']).trim_start();
    if let Some(rest) = text.strip_prefix("```") {
        let body = rest.split_once('\n').map_or("", |(_, body)| body);
        let body = body.split("```").next().unwrap_or(body);
        return body.trim_end().to_owned();
    }
    if let Some(rest) = text.strip_prefix('`') {
        let span = rest.split('`').next().unwrap_or(rest);
        return span.trim_end().to_owned();
    }
    let line = text.lines().next().unwrap_or("");
    line.trim_end_matches(['*', ' ', '\t']).to_owned()
}

/// A text's non-whitespace characters, each with its byte range.
fn significant(text: &str) -> Vec<(char, usize, usize)> {
    text.char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .map(|(i, c)| (c, i, i + c.len_utf8()))
        .collect()
}

/// The edit that makes `fix` in `text`: the quote found blind to
/// whitespace (an occurrence within `prefer`'s 1-based lines wins when
/// there are several), the part that differs replaced, as whole lines.
pub fn line_edit(
    text: &str,
    fix: &LineFix,
    prefer: Option<(usize, usize)>,
) -> Result<LineEdit, NoLineFix> {
    let file = significant(text);
    let wrong = significant(&fix.wrong);
    let fixed = significant(&fix.fixed);
    let chars = |s: &[(char, usize, usize)]| s.iter().map(|c| c.0).collect::<Vec<_>>();
    let (file_chars, wrong_chars, fixed_chars) = (chars(&file), chars(&wrong), chars(&fixed));
    if wrong_chars == fixed_chars {
        return Err(NoLineFix::Unchanged);
    }
    if wrong_chars.is_empty() {
        return Err(NoLineFix::NotFound);
    }
    // A linear-time search (a model's quote may be long, a file large):
    // byte offsets in the squeezed text, mapped back to characters.
    let squeezed: String = file_chars.iter().collect();
    let quote: String = wrong_chars.iter().collect();
    let mut starts = Vec::with_capacity(file_chars.len());
    let mut offset = 0;
    for c in &file_chars {
        starts.push(offset);
        offset += c.len_utf8();
    }
    let found: Vec<usize> = squeezed
        .match_indices(&quote)
        .filter_map(|(at, _)| starts.binary_search(&at).ok())
        .collect();
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    // 1-based: how many lines start at or before `byte`.
    let line_of = |byte: usize| line_starts.partition_point(|&start| start <= byte);
    let start = match found.as_slice() {
        [] => return Err(NoLineFix::NotFound),
        [only] => *only,
        many => {
            let within: Vec<usize> = many
                .iter()
                .copied()
                .filter(|&i| prefer.is_some_and(|(a, b)| (a..=b).contains(&line_of(file[i].1))))
                .collect();
            match within.as_slice() {
                [only] => *only,
                _ => return Err(NoLineFix::Ambiguous(many.len())),
            }
        }
    };
    // What differs: the quotes' common start and end set aside.
    let prefix = wrong_chars
        .iter()
        .zip(&fixed_chars)
        .take_while(|(a, b)| a == b)
        .count();
    let room = wrong_chars.len().min(fixed_chars.len()) - prefix;
    let suffix = wrong_chars
        .iter()
        .rev()
        .zip(fixed_chars.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    // Byte ranges between the kept characters, in the file and in FIXED:
    // the whitespace around the change is the model's.
    let matched = &file[start..start + wrong_chars.len()];
    let file_from = match prefix {
        0 => matched[0].1,
        p => matched[p - 1].2,
    };
    let file_to = match suffix {
        0 => matched[matched.len() - 1].2,
        s => matched[matched.len() - s].1,
    };
    let fixed_from = match prefix {
        0 => fixed.first().map_or(0, |c| c.1),
        p => fixed[p - 1].2,
    };
    let fixed_to = match suffix {
        0 => fixed.last().map_or(0, |c| c.2),
        s => fixed[fixed.len() - s].1,
    };
    let replacement = fix
        .fixed
        .get(fixed_from..fixed_to.max(fixed_from))
        .unwrap_or("");
    let region = &text[file_from..file_to.max(file_from)];
    if region.contains('\n') || replacement.contains('\n') {
        return Err(NoLineFix::SpansLines);
    }
    // Whole lines, extended upwards until they are unique in the file
    // (a few lines at most: each try reads the whole file).
    let line_start = text[..file_from].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[file_to..]
        .find('\n')
        .map_or(text.len(), |i| file_to + i);
    let mut from = line_start;
    for _ in 0..MAX_CONTEXT_LINES {
        let search = &text[from..line_end];
        if text.matches(search).count() == 1 || from == 0 {
            let replace = format!(
                "{}{replacement}{}",
                &text[from..file_from],
                &text[file_to.max(file_from)..line_end]
            );
            return Ok(LineEdit {
                search: search.to_owned(),
                replace,
                line: line_of(file_from),
            });
        }
        from = text[..from - 1].rfind('\n').map_or(0, |i| i + 1);
    }
    Err(NoLineFix::Ambiguous(
        text.matches(&text[from..line_end]).count(),
    ))
}

/// Lines above the change an edit's search text may take to be unique.
const MAX_CONTEXT_LINES: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(wrong: &str, fixed: &str) -> LineFix {
        LineFix {
            wrong: wrong.to_owned(),
            fixed: fixed.to_owned(),
        }
    }

    fn applied(text: &str, f: &LineFix) -> String {
        let edit = line_edit(text, f, None).expect("an edit");
        assert_eq!(text.matches(&edit.search).count(), 1, "unique search");
        text.replacen(&edit.search, &edit.replace, 1)
    }

    #[test]
    fn answers_as_models_write_them() {
        let cases = [
            ("WRONG: `if weight < j:`\nFIXED: `if weight <= j:`", vec![fix("if weight < j:", "if weight <= j:")]),
            ("WRONG: ```python\n    return kth(above, k)\n``` FIXED: ```python\n    return kth(above, k - 1)\n```", vec![fix("    return kth(above, k)", "    return kth(above, k - 1)")]),
            ("**WRONG:** x = 1\n**FIXED:** x = 2\n\nBecause x must be two.", vec![fix("x = 1", "x = 2")]),
            ("WRONG: `if end == -1:` → `if end == -1 or end == cols:`\nFIXED: `if end == -1 or end == cols:`", vec![fix("if end == -1:", "if end == -1 or end == cols:")]),
            ("wrong: a\nfixed: b\nWRONG: c\nFIXED: d", vec![fix("a", "b"), fix("c", "d")]),
            ("The fix: change the loop.", vec![]),
            ("FIXED: a\nWRONG: b", vec![]),
            ("WRONG: ``\nFIXED: `x`", vec![]),
        ];
        for (answer, want) in cases {
            assert_eq!(line_fixes(answer), want, "{answer}");
        }
        // A hundred pairs: the first eight are taken.
        let many = "WRONG: a\nFIXED: b\n".repeat(100);
        assert_eq!(line_fixes(&many), vec![fix("a", "b"); 8]);
    }

    #[test]
    fn only_what_differs_changes() {
        let code = "def f(a, b, k):\n    if k == 0:\n        return []\n\n    for i in range(a, b + 1 - k):\n        pass\n";
        // Two lines joined in the quote; the insertion lands between the brackets.
        assert_eq!(
            applied(code, &fix("if k == 0: return []", "if k == 0: return [[]]")),
            code.replace("return []", "return [[]]")
        );
        // Unindented quote; the model's spacing around the change is kept.
        assert_eq!(
            applied(
                code,
                &fix(
                    "for i in range(a, b + 1 - k):",
                    "for i in range(a, b - k + 1):"
                )
            ),
            code.replace("b + 1 - k", "b - k + 1")
        );
        let code = "    if weight < j:\n        x = max(x, y)\n";
        assert_eq!(
            applied(code, &fix("if weight < j:", "if weight <= j:")),
            "    if weight <= j:\n        x = max(x, y)\n"
        );
        assert_eq!(
            applied(code, &fix("x = max(x, y)", "x = max(x, y + 1)")),
            "    if weight < j:\n        x = max(x, y + 1)\n"
        );
        // A part of a line quoted.
        assert_eq!(
            applied("pivot = arr[0]\n", &fix("arr[0]", "arr[k]")),
            "pivot = arr[k]\n"
        );
    }

    #[test]
    fn what_cannot_be_placed_is_refused_with_why() {
        let code = "a = 1\nb = 2\na = 1\n";
        assert_eq!(
            line_edit(code, &fix("a = 1", "a = 1"), None),
            Err(NoLineFix::Unchanged)
        );
        assert_eq!(
            line_edit(code, &fix("c = 3", "c = 4"), None),
            Err(NoLineFix::NotFound)
        );
        assert_eq!(
            line_edit(code, &fix("a = 1", "a = 2"), None),
            Err(NoLineFix::Ambiguous(2))
        );
        // The preferred lines decide; the search grows until it is unique.
        let edit = line_edit(code, &fix("a = 1", "a = 2"), Some((3, 3))).expect("an edit");
        assert_eq!(edit.line, 3);
        assert_eq!(
            code.replacen(&edit.search, &edit.replace, 1),
            "a = 1\nb = 2\na = 2\n"
        );
        // A change between two lines of the file would join them.
        assert_eq!(
            line_edit(
                "if a:\n    return b\n",
                &fix("if a: return b", "if a: x = 1; return b"),
                None
            ),
            Err(NoLineFix::SpansLines)
        );
    }

    #[test]
    fn a_long_quote_in_a_large_file_is_answered_at_once() {
        // Quadratic matching would take minutes here.
        let file = "a".repeat(2_000_000) + "\nb = 1\n";
        let quote = "a".repeat(20_000) + "c";
        assert_eq!(
            line_edit(&file, &fix(&quote, "x"), None),
            Err(NoLineFix::NotFound)
        );
        assert!(line_edit(&file, &fix("b = 1", "b = 2"), None).is_ok());
        // A line repeated with the same lines above it, over and over:
        // ambiguous after a few lines of context, not a scan per line.
        let repeated = "x = 0\n".repeat(50_000);
        assert!(matches!(
            line_edit(&repeated, &fix("x = 0", "x = 1"), Some((40_000, 40_000))),
            Err(NoLineFix::Ambiguous(_))
        ));
    }

    #[test]
    fn bytes_outside_the_change_are_kept() {
        // Between the kept characters the spacing is the model's; outside
        // them, every byte (line endings, other lines) is the file's.
        let code = "x = 1  # é\r\ny = f( 2 )  \r\nz = 3\r\n";
        assert_eq!(
            applied(code, &fix("y = f(2)", "y = f(3)")),
            "x = 1  # é\r\ny = f(3)  \r\nz = 3\r\n"
        );
    }
}
