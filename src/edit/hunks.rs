//! The rewrite as a minimal set of edits: a line diff of the replacement
//! against the selection, so untouched lines keep their marks, folds and
//! breakpoints; and the re-basing of those edits onto a document that
//! changed meanwhile.
use std::ops::Range;

use similar::{DiffOp, TextDiff};

/// Replace `range` (bytes of the document) with `text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    pub range: Range<usize>,
    pub text: String,
}

/// The changed lines between `old` (which starts at byte `offset` of the
/// document) and `new`, in document order, non-overlapping.
pub fn hunks(old: &str, new: &str, offset: usize) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(old, new);
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let old_starts = starts(&old_lines);
    let new_starts = starts(&new_lines);
    let mut out: Vec<Hunk> = Vec::new();
    let mut pending: Option<(Range<usize>, Range<usize>)> = None;
    let flush = |pending: &mut Option<(Range<usize>, Range<usize>)>, out: &mut Vec<Hunk>| {
        if let Some((o, n)) = pending.take() {
            out.push(Hunk {
                range: offset + old_starts[o.start]..offset + old_starts[o.end],
                text: new[new_starts[n.start]..new_starts[n.end]].to_owned(),
            });
        }
    };
    for op in diff.ops() {
        if let DiffOp::Equal { .. } = op {
            flush(&mut pending, &mut out);
            continue;
        }
        let (o, n) = (op.old_range(), op.new_range());
        pending = Some(match pending.take() {
            Some((po, pn)) => (po.start..o.end, pn.start..n.end),
            None => (o, n),
        });
    }
    flush(&mut pending, &mut out);
    out
}

/// Byte offsets of each line start, plus the end.
fn starts(lines: &[&str]) -> Vec<usize> {
    let mut v = Vec::with_capacity(lines.len() + 1);
    let mut at = 0;
    v.push(0);
    for l in lines {
        at += l.len();
        v.push(at);
    }
    v
}

/// Moves `hunks`, planned on `old`, onto `new` (the document after the
/// user's changes): `None` when a change touched `guarded` (the rewritten
/// range) or the lines it is on, since the rewrite would then overwrite it.
pub fn rebase(old: &str, new: &str, guarded: Range<usize>, hunks: &[Hunk]) -> Option<Vec<Hunk>> {
    if old == new {
        return Some(hunks.to_vec());
    }
    let diff = TextDiff::from_lines(old, new);
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let old_starts = starts(&old_lines);
    let new_starts = starts(&new_lines);
    // The lines holding the guarded range must sit inside one unchanged run.
    let first = old_starts
        .partition_point(|s| *s <= guarded.start)
        .saturating_sub(1);
    let last = old_starts
        .partition_point(|s| *s < guarded.end.max(guarded.start + 1))
        .saturating_sub(1)
        .max(first);
    for op in diff.ops() {
        if let DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = *op
        {
            if old_index <= first && last < old_index + len {
                let shift = new_starts[new_index] as isize - old_starts[old_index] as isize;
                return Some(
                    hunks
                        .iter()
                        .map(|h| Hunk {
                            range: h.range.start.saturating_add_signed(shift)
                                ..h.range.end.saturating_add_signed(shift),
                            text: h.text.clone(),
                        })
                        .collect(),
                );
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(doc: &str, hunks: &[Hunk]) -> String {
        let mut out = doc.to_owned();
        for h in hunks.iter().rev() {
            out.replace_range(h.range.clone(), &h.text);
        }
        out
    }

    #[test]
    fn only_changed_lines_and_they_apply() {
        let old = "a\nb\nc\nd\ne\n";
        let new = "a\nB\nc\nd\ne\nf\n";
        let h = hunks(old, new, 10);
        assert_eq!(
            h,
            vec![
                Hunk {
                    range: 12..14,
                    text: "B\n".into()
                },
                Hunk {
                    range: 20..20,
                    text: "f\n".into()
                },
            ]
        );
        let doc = format!("0123456789{old}tail");
        assert_eq!(apply(&doc, &h), format!("0123456789{new}tail"));
    }

    #[test]
    fn rebase_follows_changes_elsewhere_and_refuses_touching_ones() {
        let old = "x\ndef f():\n    return 1\ny\n";
        let rewritten = 2..24; // "def f():\n    return 1\n"
        let h = hunks(
            &old[rewritten.clone()],
            "def f():\n    return 2\n",
            rewritten.start,
        );
        let typed_above = format!("# hi\n{old}");
        let moved = rebase(old, &typed_above, rewritten.clone(), &h).unwrap();
        assert_eq!(
            apply(&typed_above, &moved),
            "# hi\nx\ndef f():\n    return 2\ny\n"
        );
        let typed_below = format!("{old}z\n");
        assert_eq!(rebase(old, &typed_below, rewritten.clone(), &h).unwrap(), h);
        let typed_inside = old.replace("return 1", "return 11");
        assert_eq!(rebase(old, &typed_inside, rewritten, &h), None);
    }
}
