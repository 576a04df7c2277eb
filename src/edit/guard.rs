//! What makes a fitted answer unfit to apply: it adds syntax errors, it
//! no longer defines what the selection defined (the model rewrote
//! something else), it repeats definitions the file has elsewhere (the
//! model copied the code around the selection), or, asked only for
//! documentation, it changed the code. Each gets one retry with the fault
//! fed back, then a refusal.
use std::ops::Range;

use ropey::Rope;
use tree_sitter::{Node, Tree};

use super::check::{self, Replaced};
use super::{scope, Reason, Snapshot};

/// Why an answer is not applied.
pub struct Fault {
    pub reason: Reason,
    /// For the model's retry.
    pub feedback: String,
    /// For the user (completed with "also after one retry").
    pub message: String,
}

/// The fault of `replaced` (the document with the answer in `region`, in
/// place of `range` of `doc`), if any; `errors_before`: the document's
/// syntax errors before.
pub fn fault(
    doc: &Snapshot<'_>,
    range: Range<usize>,
    replaced: &Replaced,
    region: Range<usize>,
    errors_before: usize,
    instruction: &str,
) -> Option<Fault> {
    let errors_after = replaced.tree.as_ref().map(check::error_count).unwrap_or(0);
    if errors_after > errors_before {
        let listed = check::describe_errors(replaced, region).join("; ");
        return Some(Fault {
            reason: Reason::SyntaxErrors,
            feedback: format!("That code has syntax errors once it replaces the selection: {listed}. Reply with a corrected complete version of the selected code in one fenced code block."),
            message: format!("the model's rewrite adds syntax errors ({listed})"),
        });
    }
    let (Some(old_tree), Some(new_tree)) = (&doc.tree, &replaced.tree) else {
        return None;
    };
    let kept = scope::defined_names(new_tree, &replaced.rope, region.clone());
    let had = scope::defined_names(old_tree, &doc.rope, range.clone());
    let lost: Vec<&String> = had
        .iter()
        .filter(|name| !kept.contains(name) && !allows_losing(instruction, name))
        .collect();
    if !lost.is_empty() {
        let names = quoted(&lost);
        return Some(Fault {
            reason: Reason::LostDefinitions,
            feedback: format!("That code no longer defines {names}, which the selected code defines. Rewrite the selected code itself as instructed, keeping {names}, and reply with the complete new version in one fenced code block."),
            message: format!("the model's answer no longer defines {names} (it rewrote something else)"),
        });
    }
    if documentation_only(instruction)
        && code_tokens(old_tree, &doc.rope, range.clone())
            != code_tokens(new_tree, &replaced.rope, region.clone())
    {
        return Some(Fault {
            reason: Reason::CodeChanged,
            feedback: "That answer changes the code, but only documentation was asked for. Reply with the selected code exactly as it is, with documentation comments or docstrings added, in one fenced code block.".to_owned(),
            message: "the model's answer changes the code, and only documentation was asked for".to_owned(),
        });
    }
    let added: Vec<&String> = kept.iter().filter(|name| !had.contains(name)).collect();
    let copied = scope::defined_outside(new_tree, &replaced.rope, region, &added);
    if !copied.is_empty() {
        let names = quoted(&copied.iter().collect::<Vec<_>>());
        return Some(Fault {
            reason: Reason::CopiedContext,
            feedback: format!("That code also defines {names}, which the file already defines outside the selection. Reply with the new version of the selected code only, in one fenced code block."),
            message: format!("the model's answer repeats {names} from elsewhere in the file instead of rewriting the selection"),
        });
    }
    None
}

fn quoted(names: &[&String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `instruction` may mean to remove or rename `name`.
fn allows_losing(instruction: &str, name: &str) -> bool {
    let lower = instruction.to_lowercase();
    const VERBS: &[&str] = &[
        "remove", "delete", "rename", "inline", "merge", "drop", "split", "replace",
    ];
    lower.contains(&name.to_lowercase()) || VERBS.iter().any(|v| lower.contains(v))
}

/// Whether `instruction` asks for documentation and nothing else (the
/// "Add documentation" preset, "add a docstring", "document this"): then
/// the code's tokens must stay as they are.
pub fn documentation_only(instruction: &str) -> bool {
    let lower = instruction.to_lowercase();
    let about_docs = ["document", "docstring", "doc comment", "comment"]
        .iter()
        .any(|w| lower.contains(w));
    if !about_docs {
        return false;
    }
    let keeps_code = [
        "do not change the code",
        "don't change the code",
        "without changing the code",
        "leave the code",
        "keep the code",
    ]
    .iter()
    .any(|w| lower.contains(w));
    const CHANGES: &[&str] = &[
        "fix",
        "rename",
        "refactor",
        "simplify",
        "rewrite",
        "change",
        "remove",
        "delete",
        "replace",
        "optimi",
        "improve",
        "type annotation",
        "handle",
        "implement",
        "convert",
    ];
    keeps_code || !CHANGES.iter().any(|w| lower.contains(w))
}

/// A hash of `text`'s code: its tokens without comments and docstrings,
/// so that two versions that differ only in layout, comments or
/// documentation hash alike. Text that does not parse (or is too big to)
/// hashes by its whitespace-separated words.
pub fn code_fingerprint(language: Option<crate::syntax::Language>, text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    match language.and_then(|l| crate::syntax::parse_str(l, text, None)) {
        Some(tree) => code_tokens(&tree, &Rope::from_str(text), 0..text.len()).hash(&mut hasher),
        None => text.split_whitespace().for_each(|w| w.hash(&mut hasher)),
    }
    hasher.finish()
}

/// The code's tokens in `range`: leaves of the tree, without comments and
/// without bare string statements (Python docstrings), so that added
/// documentation changes nothing and any code change does.
fn code_tokens(tree: &Tree, rope: &Rope, range: Range<usize>) -> Vec<String> {
    let mut out = Vec::new();
    collect_code_tokens(tree.root_node(), rope, &range, &mut out);
    out
}

fn collect_code_tokens(node: Node<'_>, rope: &Rope, range: &Range<usize>, out: &mut Vec<String>) {
    if node.end_byte() <= range.start || node.start_byte() >= range.end {
        return;
    }
    if node.kind().contains("comment") || is_docstring(node) {
        return;
    }
    if node.child_count() == 0 {
        let start = node.start_byte().max(range.start);
        let end = node.end_byte().min(range.end);
        if start < end && end <= rope.len_bytes() {
            out.push(rope.byte_slice(start..end).to_string());
        }
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect_code_tokens(child, rope, range, out);
    }
}

/// A statement that is only a string literal: a docstring.
fn is_docstring(node: Node<'_>) -> bool {
    node.kind() == "expression_statement"
        && node.named_child_count() == 1
        && node
            .named_child(0)
            .is_some_and(|c| matches!(c.kind(), "string" | "concatenated_string"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{parse_str, Language};

    fn tokens(code: &str) -> Vec<String> {
        let tree = parse_str(Language::Python, code, None).unwrap();
        code_tokens(&tree, &Rope::from_str(code), 0..code.len())
    }

    #[test]
    fn documentation_leaves_the_code_tokens_as_they_are_and_code_changes_do_not() {
        let before = "def area(w, h):\n    return w * h\n";
        let documented = "def area(w, h):\n    \"\"\"The area.\n\n    Args: w, h.\n    \"\"\"\n    # width times height\n    return w * h  # done\n";
        assert_eq!(tokens(before), tokens(documented));
        assert_ne!(
            tokens(before),
            tokens("def area(w, h):\n    return w + h\n")
        );
        assert_ne!(
            tokens(before),
            tokens("def area(w, h):\n    \"\"\"Doc.\"\"\"\n    return None\n")
        );
        // A string that is code (an argument) counts.
        assert_ne!(tokens("f('a')\n"), tokens("f('b')\n"));
    }

    #[test]
    fn code_fingerprints_ignore_layout_comments_and_docstrings_but_not_code() {
        let python = Some(Language::Python);
        let code = "def f(x):\n    return x + 1\n";
        let same = [
            "def f(x):\n    # add one\n    return x + 1  # done\n",
            "def f(x):\n    \"\"\"One more.\"\"\"\n\n    return x + 1\n",
            "def f( x ):\n    return x+1\n\n\n",
        ];
        for other in same {
            assert_eq!(
                code_fingerprint(python, code),
                code_fingerprint(python, other),
                "{other}"
            );
        }
        for other in [
            "def f(x):\n    return x - 1\n",
            "def f(y):\n    return y + 1\n",
        ] {
            assert_ne!(
                code_fingerprint(python, code),
                code_fingerprint(python, other),
                "{other}"
            );
        }
        // Without a grammar: the words, whatever the spacing.
        assert_eq!(
            code_fingerprint(None, "a  b\nc"),
            code_fingerprint(None, "a b c\n")
        );
        assert_ne!(
            code_fingerprint(None, "a b c"),
            code_fingerprint(None, "a b d")
        );
    }

    #[test]
    fn which_instructions_ask_for_documentation_only() {
        for only in [
            "Add documentation comments (docstrings or doc comments, in this language's usual style) to the definitions in this code. Do not change the code itself.",
            "Add a docstring to this function.",
            "document this",
            "Add comments explaining the loop",
        ] {
            assert!(documentation_only(only), "{only}");
        }
        for more in [
            "Simplify this code",
            "Fix the bug and add a docstring",
            "Rename x to width and document it",
            "Add type annotations",
        ] {
            assert!(!documentation_only(more), "{more}");
        }
    }
}
