//! The symbol hierarchy, by byte-range containment.
use std::cmp::Reverse;

use super::{Definition, SymbolKind, SymbolNode};

/// Nests definitions by range containment: each goes under the innermost
/// definition that strictly contains it; children are sorted by position.
///
/// Guarantees LSP's invariants whatever the input: a child's range lies in
/// its parent's range, and every selection (`name_range`) lies in its range.
/// Definitions with identical ranges (Go's `var a, b int`) become siblings.
/// A definition that straddles its would-be parent's end is clipped to the
/// parent when its name is inside it, and becomes a sibling otherwise.
pub fn symbol_tree(definitions: Vec<Definition>) -> Vec<SymbolNode> {
    let mut defs = definitions;
    for d in &mut defs {
        sanitize(d);
    }
    // Outer before inner; the remaining keys only make ties deterministic.
    defs.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));

    let mut parents: Vec<Option<usize>> = Vec::with_capacity(defs.len());
    let mut stack: Vec<usize> = Vec::new();
    for i in 0..defs.len() {
        while let Some(&top) = stack.last() {
            let (outer, inner) = (&defs[top], &defs[i]);
            let strictly_contains = outer.range.start <= inner.range.start
                && inner.range.end <= outer.range.end
                && outer.range != inner.range;
            let holds_name = outer.range.start <= inner.name_range.start
                && inner.name_range.end <= outer.range.end
                && outer.range.start < inner.range.start;
            if strictly_contains {
                break;
            }
            if holds_name {
                // Straddler: clip it into the parent (its name still fits).
                let end = outer.range.end;
                defs[i].range.end = end;
                break;
            }
            stack.pop();
        }
        parents.push(stack.last().copied());
        stack.push(i);
    }
    assemble(defs, &parents)
}

/// A total order: outer before inner, then every field, so that the result
/// does not depend on the input order.
#[allow(clippy::type_complexity)] // a tuple is the clearest lexicographic key
fn sort_key(
    d: &Definition,
) -> (
    usize,
    Reverse<usize>,
    usize,
    usize,
    SymbolKind,
    &str,
    Option<&str>,
) {
    (
        d.range.start,
        Reverse(d.range.end),
        d.name_range.start,
        d.name_range.end,
        d.kind,
        &d.name,
        d.detail.as_deref(),
    )
}

/// Widens the range to cover the name, so selection ⊆ range holds.
fn sanitize(d: &mut Definition) {
    if d.name_range.start > d.name_range.end {
        d.name_range = d.name_range.end..d.name_range.start;
    }
    d.range = d.range.start.min(d.name_range.start)..d.range.end.max(d.name_range.end);
}

/// Builds the nodes bottom-up (children always follow their parent in
/// `defs`), so deep nesting needs no recursion.
fn assemble(defs: Vec<Definition>, parents: &[Option<usize>]) -> Vec<SymbolNode> {
    let mut slots: Vec<Option<SymbolNode>> = defs
        .into_iter()
        .map(|definition| {
            Some(SymbolNode {
                definition,
                children: Vec::new(),
            })
        })
        .collect();
    let mut roots = Vec::new();
    for i in (0..slots.len()).rev() {
        let Some(mut node) = slots[i].take() else {
            continue;
        };
        // Children were pushed last-first.
        node.children.reverse();
        match parents[i]
            .and_then(|p| slots.get_mut(p))
            .and_then(Option::as_mut)
        {
            Some(parent) => parent.children.push(node),
            None => roots.push(node),
        }
    }
    roots.reverse();
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(
        name: &str,
        range: std::ops::Range<usize>,
        name_range: std::ops::Range<usize>,
    ) -> Definition {
        Definition {
            name: name.into(),
            kind: SymbolKind::Function,
            range,
            name_range,
            detail: None,
        }
    }

    fn shape(nodes: &[SymbolNode]) -> String {
        nodes
            .iter()
            .map(|n| {
                if n.children.is_empty() {
                    n.definition.name.clone()
                } else {
                    format!("{}({})", n.definition.name, shape(&n.children))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn nests_by_containment() {
        let tree = symbol_tree(vec![
            def("c", 12..14, 12..13),
            def("a", 0..20, 1..2),
            def("b", 5..10, 5..6),
            def("d", 30..40, 31..32),
            def("b1", 6..8, 6..7),
        ]);
        assert_eq!(shape(&tree), "a(b(b1) c) d");
    }

    #[test]
    fn identical_ranges_are_siblings() {
        let tree = symbol_tree(vec![
            def("outer", 0..50, 0..5),
            def("y", 10..20, 14..15),
            def("x", 10..20, 11..12),
            def("inner", 12..18, 16..17),
        ]);
        assert_eq!(shape(&tree), "outer(x y(inner))");
    }

    #[test]
    fn straddlers_are_clipped_or_lifted() {
        let tree = symbol_tree(vec![
            def("a", 0..10, 0..1),
            def("b", 5..15, 6..7),
            def("c", 8..20, 12..13),
        ]);
        assert_eq!(shape(&tree), "a(b) c");
        assert_eq!(tree[0].children[0].definition.range, 5..10);
    }

    #[test]
    fn selection_is_forced_inside_range() {
        let tree = symbol_tree(vec![def("a", 5..10, 2..3)]);
        assert_eq!(tree[0].definition.range, 2..10);
    }
}
