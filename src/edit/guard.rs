//! What makes a fitted answer unfit to apply: it adds syntax errors, it
//! no longer defines what the selection defined (the model rewrote
//! something else), or it repeats definitions the file has elsewhere (the
//! model copied the code around the selection). Each gets one retry with
//! the fault fed back, then a refusal.
use std::ops::Range;

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
    let had = scope::defined_names(old_tree, &doc.rope, range);
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
