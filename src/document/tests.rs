use super::*;
use crate::position::tests::ts_point_naive;

fn doc(text: &str) -> Document {
    let uri = Url::parse("file:///tmp/notes.txt").unwrap();
    Document::new(uri, "plaintext".into(), 1, text)
}

/// `((line, character), (line, character))`.
type Span = ((u32, u32), (u32, u32));

fn change(range: Option<Span>, text: &str) -> TextDocumentContentChangeEvent {
    TextDocumentContentChangeEvent {
        range: range
            .map(|((l1, c1), (l2, c2))| Range::new(Position::new(l1, c1), Position::new(l2, c2))),
        range_length: None,
        text: text.into(),
    }
}

#[test]
fn changes_apply_in_order() {
    let mut d = doc("hello 😀 world");
    let changes = [
        change(Some(((0, 6), (0, 8))), "🙂🙂"), // utf-16: the emoji
        change(Some(((0, 0), (0, 5))), "bye"),
        change(Some(((0, 99), (0, 99))), "\r\n!"),
    ];
    d.apply_changes(2, &changes, PositionEncoding::Utf16)
        .unwrap();
    assert_eq!(d.text(), "bye 🙂🙂 world\r\n!");
    assert_eq!(d.version, 2);
    d.apply_changes(3, &[change(None, "new")], PositionEncoding::Utf8)
        .unwrap();
    assert_eq!(d.text(), "new");
}

#[test]
fn stale_version_changes_nothing() {
    let mut d = doc("abc");
    d.apply_changes(5, &[], PositionEncoding::Utf16).unwrap();
    let err = d.apply_changes(4, &[change(None, "x")], PositionEncoding::Utf16);
    assert_eq!(err, Err(ChangeError::StaleVersion { got: 4, stored: 5 }));
    assert_eq!((d.text().as_str(), d.version), ("abc", 5));
}

#[test]
fn input_edits_are_exact() {
    let texts = ["fn a() {}\nlet 😀 = 1;\r\n", "a\rb\r\nc\rd\n😀x\r"];
    let edits: &[(usize, usize, &str)] = &[
        (0, 0, "x"),
        (3, 9, ""),
        (2, 5, "\n\r\n"),
        (1, 2, "\r"),
        (4, 4, "😀\n"),
        (0, 14, "z"),
    ];
    for text in texts {
        for &(start, end, insert) in edits {
            let mut d = doc(text);
            let edit = d.input_edit(start, end, insert);
            let mut after = text.to_owned();
            after.replace_range(start..end, insert);
            assert_eq!(
                edit.start_position,
                ts_point_naive(text, start),
                "{text:?} {start}"
            );
            assert_eq!(
                edit.old_end_position,
                ts_point_naive(text, end),
                "{text:?} {end}"
            );
            let new_end = ts_point_naive(&after, start + insert.len());
            assert_eq!(edit.new_end_position, new_end, "{text:?} {insert:?}");
            assert_eq!(edit.new_end_byte, start + insert.len());
            d.replace_bytes(start..end, insert);
            assert_eq!(d.text(), after);
            assert_eq!(d.lone_crs, count_lone_cr_str(&after), "{after:?}");
        }
    }
}

#[test]
fn deferred_reparse() {
    let uri = Url::parse("file:///tmp/lib.rs").unwrap();
    let mut d = Document::new(uri, "rust".into(), 1, "fn a() {}");
    let edit = change(Some(((0, 3), (0, 4))), "b");
    d.apply_changes_deferred(2, &[edit], PositionEncoding::Utf16)
        .unwrap();
    assert!(d.needs_reparse());
    d.reparse();
    assert!(!d.needs_reparse());
    assert_eq!(d.text(), "fn b() {}");
    if let Some(tree) = &d.tree {
        assert_eq!(tree.root_node().byte_range(), 0..9);
    }
}

#[test]
fn a_tree_parsed_elsewhere_is_installed_only_if_no_change_came_since() {
    let uri = Url::parse("file:///tmp/lib.rs").unwrap();
    let mut d = Document::new_unparsed(uri, "rust".into(), 1, "fn a() {}");
    assert!(d.needs_reparse() && d.tree.is_none());
    let seen = d.revision();
    let parsed = crate::syntax::parse_rope(Language::Rust, &d.rope.clone(), None);
    // A change arrives while the tree was being parsed: the stale tree is refused.
    let edit = change(Some(((0, 3), (0, 4))), "b");
    d.apply_changes_deferred(2, &[edit], PositionEncoding::Utf16)
        .unwrap();
    assert!(!d.install_tree(seen, parsed));
    assert!(d.needs_reparse());
    // A tree for the current text is accepted.
    let current = d.revision();
    let parsed = crate::syntax::parse_rope(Language::Rust, &d.rope.clone(), None);
    assert!(d.install_tree(current, parsed));
    assert!(!d.needs_reparse());
    assert_eq!(
        d.tree
            .as_ref()
            .unwrap()
            .root_node()
            .utf8_text(d.text().as_bytes())
            .unwrap(),
        "fn b() {}"
    );
    // Nothing to install once up to date.
    assert!(!d.install_tree(current, None));
}

/// The first parse of a big file outlasts the pause between edits:
/// the tree it gives is caught up with the edits it missed and kept, so
/// the next reparse is incremental, and right.
#[test]
fn a_first_tree_parsed_while_edits_came_is_caught_up_and_kept() {
    let uri = Url::parse("file:///tmp/lib.rs").unwrap();
    let text = "fn a() {}\n\nfn b() {\n    let x = 1;\n}\n";
    let mut d = Document::new_unparsed(uri, "rust".into(), 1, text);
    let seen = d.revision();
    let parsed = crate::syntax::parse_rope(Language::Rust, &d.rope.clone(), None);
    let edits = [
        vec![change(Some(((3, 14), (3, 14))), "\n    let y = ")],
        // Two changes in one notification.
        vec![
            change(Some(((0, 3), (0, 4))), "alpha"),
            change(Some(((4, 12), (4, 12))), "x + 2;"),
        ],
        vec![change(Some(((1, 0), (1, 0))), "struct S;\n")],
    ];
    for (version, batch) in (2..).zip(&edits) {
        d.apply_changes_deferred(version, batch, PositionEncoding::Utf16)
            .unwrap();
    }
    assert!(!d.install_tree(seen, parsed), "not the current text's");
    assert!(d.tree.is_some(), "kept, caught up");
    assert!(d.needs_reparse());
    d.reparse();
    assert_eq!(d.incremental_parses, 1, "reparsed from the kept tree");
    let fresh = crate::syntax::parse_rope(Language::Rust, &d.rope.clone(), None).unwrap();
    let reparsed = d.tree.as_ref().unwrap();
    assert_eq!(reparsed.root_node().to_sexp(), fresh.root_node().to_sexp());
    assert!(
        d.text().contains("fn alpha() {}\nstruct S;\n"),
        "{}",
        d.text()
    );
    let names = |tree: &Tree| {
        let root = tree.root_node();
        let mut cursor = root.walk();
        root.children(&mut cursor)
            .map(|n| (n.kind().to_owned(), n.byte_range()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(reparsed), names(&fresh));
}

/// After a full replacement, or with an edited tree of its own, a
/// document has no use for a tree parsed from an older text.
#[test]
fn an_older_tree_is_not_kept_after_a_full_replacement() {
    let uri = Url::parse("file:///tmp/lib.rs").unwrap();
    let mut d = Document::new_unparsed(uri, "rust".into(), 1, "fn a() {}");
    let seen = d.revision();
    let parsed = crate::syntax::parse_rope(Language::Rust, &d.rope.clone(), None);
    d.apply_changes_deferred(
        2,
        &[change(None, "fn b() {}\nfn c() {}")],
        PositionEncoding::Utf16,
    )
    .unwrap();
    assert!(!d.install_tree(seen, parsed.clone()));
    assert!(d.tree.is_none());

    let mut d = Document::new(
        Url::parse("file:///tmp/l.rs").unwrap(),
        "rust".into(),
        1,
        "fn a() {}",
    );
    let edited = d.tree.clone();
    d.apply_changes_deferred(
        2,
        &[change(Some(((0, 3), (0, 4))), "b")],
        PositionEncoding::Utf16,
    )
    .unwrap();
    let before = d.tree.as_ref().map(|t| t.root_node().to_sexp());
    assert!(!d.install_tree(0, edited));
    assert_eq!(d.tree.as_ref().map(|t| t.root_node().to_sexp()), before);
}

#[test]
fn lone_cr_count_tracks_edits() {
    let mut d = doc("a\rb\r\nc");
    assert_eq!(d.lone_crs, 1);
    let steps: &[(Span, &str)] = &[
        (((1, 0), (1, 0)), "\n"), // "a\r\nb..." joins the lone CR
        (((0, 1), (1, 0)), "\r"), // replaces "\r\n" with "\r"
        (((0, 1), (0, 1)), "\r"), // "a\r\rb"
        (((2, 1), (2, 1)), "\r"), // "a\r\rb\r\r\nc"
    ];
    for &(range, text) in steps {
        d.apply_changes(1, &[change(Some(range), text)], PositionEncoding::Utf8)
            .unwrap();
        assert_eq!(d.lone_crs, count_lone_cr_str(&d.text()), "{:?}", d.text());
    }
}

#[test]
fn a_worn_tree_is_replaced_by_a_fresh_parse_of_the_same_text() {
    let uri = Url::parse("file:///tmp/lib.rs").unwrap();
    let mut d = Document::new(uri, "rust".into(), 1, "fn main() {\n}\n");
    assert!(!d.wants_fresh_parse());
    for i in 0..FRESH_PARSE_AFTER {
        let line = i + 1;
        let typed = format!("    let v{i} = {i};\n");
        d.apply_changes(
            1,
            &[change(Some(((line, 0), (line, 0))), &typed)],
            PositionEncoding::Utf8,
        )
        .unwrap();
        assert_eq!(
            d.wants_fresh_parse(),
            i + 1 == FRESH_PARSE_AFTER,
            "after {} parses",
            i + 1
        );
    }
    let text = d.text();
    let incremental = d.tree.as_ref().unwrap().root_node().to_sexp();
    let fresh = crate::syntax::parse_str(Language::Rust, &text, None);
    // A change since the fresh parse's text: refused, the tree given back.
    let mut changed = d.clone();
    changed
        .apply_changes(
            2,
            &[change(Some(((0, 0), (0, 0))), "\n")],
            PositionEncoding::Utf8,
        )
        .unwrap();
    assert!(changed
        .install_fresh_tree(d.revision(), fresh.clone())
        .unwrap_err()
        .is_some());
    assert!(changed.wants_fresh_parse());
    // Same text: the old tree comes back, the count starts again.
    let old = d.install_fresh_tree(d.revision(), fresh).unwrap();
    assert_eq!(old.unwrap().root_node().to_sexp(), incremental);
    assert_eq!(d.tree.as_ref().unwrap().root_node().to_sexp(), incremental);
    assert!(!d.wants_fresh_parse() && !d.needs_reparse());
    // A whole-text replacement is a parse from scratch too.
    d.incremental_parses = FRESH_PARSE_AFTER;
    d.apply_changes(3, &[change(None, "fn b() {}")], PositionEncoding::Utf8)
        .unwrap();
    assert!(!d.wants_fresh_parse());
}
