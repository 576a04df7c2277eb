use tree_sitter::{Query, QueryCursor, StreamingIterator};
#[test]
fn scratch() {
    let lang: tree_sitter::Language = tree_sitter_go::LANGUAGE.into();
    let src = "package x\nconst (\n\tmodeRead, modeWrite = 1, 2\n)\ntype S struct { a, b int }\n";
    let mut p = tree_sitter::Parser::new();
    p.set_language(&lang).unwrap();
    let tree = p.parse(src, None).unwrap();
    for q in ["(const_spec name: (identifier) @name) @def", "(const_spec name: (identifier) @name)", "(const_spec (identifier) @name)", "(field_declaration name: (field_identifier) @name) @def"] {
        let query = Query::new(&lang, q).unwrap();
        let mut c = QueryCursor::new();
        let mut m = c.matches(&query, tree.root_node(), src.as_bytes());
        let mut out = vec![];
        while let Some(m) = m.next() { out.push(m.captures.iter().map(|c| &src[c.node.byte_range()]).collect::<Vec<_>>().join("|")); }
        println!("{q}: {out:?}");
    }
}
