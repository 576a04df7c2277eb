//! `symbol_tree` on arbitrary input: LSP's nesting invariants always hold
//! and no definition is lost.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::ops::Range;

use fettle::syntax::{symbol_tree, Definition, SymbolKind, SymbolNode};
use proptest::prelude::*;

fn check(nodes: &[SymbolNode], parent: Option<&Range<usize>>, count: &mut usize) {
    let mut prev = 0;
    for n in nodes {
        *count += 1;
        let d = &n.definition;
        assert!(d.range.start <= d.name_range.start && d.name_range.end <= d.range.end);
        if let Some(p) = parent {
            assert!(
                p.start <= d.range.start && d.range.end <= p.end,
                "{d:?} not in {p:?}"
            );
        }
        assert!(d.range.start >= prev, "children out of order");
        prev = d.range.start;
        check(&n.children, Some(&d.range), count);
    }
}

fn definition() -> impl Strategy<Value = Definition> {
    (0usize..200, 0usize..60, 0usize..220, 0usize..10).prop_map(|(start, len, name, name_len)| {
        Definition {
            name: format!("d{start}_{len}"),
            kind: SymbolKind::Function,
            range: start..start + len,
            // Deliberately sometimes outside the range.
            name_range: name..name + name_len,
            detail: None,
        }
    })
}

proptest! {
    #[test]
    fn invariants_hold(defs in prop::collection::vec(definition(), 0..40)) {
        let n = defs.len();
        let tree = symbol_tree(defs.clone());
        let mut count = 0;
        check(&tree, None, &mut count);
        prop_assert_eq!(count, n);
        // Deterministic whatever the input order.
        let mut reversed = defs;
        reversed.reverse();
        prop_assert_eq!(symbol_tree(reversed), tree);
    }
}
