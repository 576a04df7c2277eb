//! The bracket scan (unmatched closers, re-typed suffix closers) and the overlap
//! of the completion's end with the suffix.

pub(super) fn is_closer(c: char) -> bool {
    matches!(c, ')' | ']' | '}')
}

fn opener_of(c: char) -> char {
    match c {
        ')' => '(',
        ']' => '[',
        _ => '{',
    }
}

/// Rough lexer state: which quote a string was opened with.
#[derive(Default)]
struct Lex {
    quote: Option<char>,
    escaped: bool,
}

enum Tok {
    Open(char),
    Close(char),
    /// A string opened before this text was closed here.
    QuoteClose(char),
    Other,
    /// Rest of the line is a comment.
    Comment,
}

impl Lex {
    /// Classifies `c` at byte `i` of `line`; `outer_quote` is the quote of a
    /// string the prefix left open (only meaningful on the completion's first line).
    fn step(&mut self, line: &str, i: usize, c: char, outer_quote: &mut Option<char>) -> Tok {
        if let Some(q) = self.quote {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == q {
                self.quote = None;
                if outer_quote.take() == Some(q) {
                    return Tok::QuoteClose(q);
                }
            }
            return Tok::Other;
        }
        match c {
            '(' | '[' | '{' => Tok::Open(c),
            ')' | ']' | '}' => Tok::Close(c),
            '"' | '`' => {
                self.quote = Some(c);
                Tok::Other
            }
            '\'' => {
                // `'a` followed by anything but a quote is a Rust lifetime or an
                // apostrophe, not a string.
                let rest = &line[i + 1..];
                let ident = rest
                    .find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                    .unwrap_or(rest.len());
                if ident > 0 && !rest[ident..].starts_with('\'') {
                    Tok::Other
                } else {
                    self.quote = Some(c);
                    Tok::Other
                }
            }
            '/' if line[i..].starts_with("//") => Tok::Comment,
            '#' if line[i..].starts_with("# ") => Tok::Comment,
            _ => Tok::Other,
        }
    }
}

/// Unclosed openers of the cursor line before the cursor, and the quote of a
/// string it leaves open.
pub(super) fn prefix_state(prefix: &str) -> (Vec<char>, Option<char>) {
    let mut stack = Vec::new();
    let mut lex = Lex::default();
    let mut none = None;
    for (i, c) in prefix.char_indices() {
        match lex.step(prefix, i, c, &mut none) {
            Tok::Open(o) => stack.push(o),
            Tok::Close(c) => {
                if stack.last() == Some(&opener_of(c)) {
                    stack.pop();
                }
            }
            Tok::Comment => break,
            Tok::QuoteClose(_) | Tok::Other => {}
        }
    }
    (stack, lex.quote)
}

pub(super) struct Scan {
    /// Byte offset in the text where the completion must end.
    pub(super) stop: usize,
    /// Bytes of the suffix re-typed by closers (and quotes) of the completion.
    pub(super) suffix_consumed: usize,
    /// A closer of the completion closed an opener of the prefix.
    pub(super) closed_prefix: bool,
}

/// Stops at a closer that closes nothing in the completion. Such a closer may
/// close an opener of the prefix that the suffix does not close (the suffix's
/// closers close the prefix's outermost openers), or re-type the next closer of
/// the suffix (consumed, i.e. replaced); otherwise the output ends before it.
pub(super) fn scan_brackets(text: &str, prefix: &str, suffix: &str) -> Scan {
    let (mut prefix_stack, prefix_quote) = prefix_state(prefix);
    let suffix_closers = suffix
        .chars()
        .take_while(|&c| is_closer(c) || matches!(c, ' ' | '\t' | '"' | '\'' | '`'))
        .filter(|&c| is_closer(c))
        .count();
    let mut free = prefix_stack.len().saturating_sub(suffix_closers);
    let mut stack: Vec<char> = Vec::new();
    let mut spos = 0usize;
    let mut closed_prefix = false;
    let mut outer_quote = prefix_quote;
    let mut line_start = 0usize;
    for (line_no, line) in text.split('\n').enumerate() {
        let mut lex = Lex {
            quote: if line_no == 0 { prefix_quote } else { None },
            escaped: false,
        };
        if line_no > 0 {
            outer_quote = None;
        }
        for (i, c) in line.char_indices() {
            match lex.step(line, i, c, &mut outer_quote) {
                Tok::Open(o) => stack.push(o),
                Tok::Close(c) => {
                    let want = opener_of(c);
                    if let Some(&top) = stack.last() {
                        if top != want {
                            return Scan {
                                stop: line_start + i,
                                suffix_consumed: spos,
                                closed_prefix,
                            };
                        }
                        stack.pop();
                    } else if free > 0 && prefix_stack.last() == Some(&want) {
                        prefix_stack.pop();
                        free -= 1;
                        closed_prefix = true;
                    } else if let Some(next) = match_suffix(suffix, spos, c) {
                        spos = next;
                        if prefix_stack.last() == Some(&want) {
                            prefix_stack.pop();
                        }
                    } else {
                        return Scan {
                            stop: line_start + i,
                            suffix_consumed: spos,
                            closed_prefix,
                        };
                    }
                }
                Tok::QuoteClose(q) => {
                    if let Some(next) = match_suffix(suffix, spos, q) {
                        spos = next;
                    }
                }
                Tok::Comment => break,
                Tok::Other => {}
            }
        }
        line_start += line.len() + 1;
    }
    Scan {
        stop: text.len(),
        suffix_consumed: spos,
        closed_prefix,
    }
}

/// If the suffix, from `pos` and past blanks, continues with `c`: the position after it.
fn match_suffix(suffix: &str, pos: usize, c: char) -> Option<usize> {
    let rest = suffix.get(pos..)?;
    let body = rest.trim_start_matches([' ', '\t']);
    body.starts_with(c)
        .then(|| suffix.len() - body.len() + c.len_utf8())
}

/// The longest k > `at_least` such that the text ends with `suffix[..k]`, where
/// `suffix[..k]` is punctuation only (`");`) or the whole suffix (trailing blanks
/// aside). Single letters would match by accident.
pub(super) fn suffix_overlap(text: &str, suffix: &str, at_least: usize) -> Option<usize> {
    let full = suffix.trim_end().len();
    if full > at_least && text.len() > full && text.ends_with(&suffix[..full]) {
        return Some(full);
    }
    let punct = suffix
        .char_indices()
        .find(|&(_, c)| c.is_alphanumeric() || c == '_' || c.is_whitespace())
        .map_or(suffix.len(), |(i, _)| i);
    (at_least + 1..=punct)
        .rev()
        .find(|&k| suffix.is_char_boundary(k) && text.ends_with(&suffix[..k]))
}
