//! A statement missing after a loop: the last piece never flushed
//! (`lines.append(text)` after the loop that appends each full line), the
//! item never pushed (`stack.append(token)` after the loop that pops the
//! others). The statement is one of the function's own method calls
//! (`receiver.method(argument)`), copied with another receiver that has
//! methods called in the lines and another variable as its argument, and
//! put right after a loop of the lines, at the loop's indentation — the
//! insertion operators of program repair (ssFix, TBar) kept to the
//! function's own statements.

use std::collections::BTreeSet;

use tree_sitter::Node;

use super::nodes::code_children;
use super::{Generator, Kind, MAX_NAMES};

/// The most receivers a statement is copied with.
const MAX_RECEIVERS: usize = 4;

fn is_loop(kind: &str) -> bool {
    matches!(
        kind,
        "for_statement"
            | "while_statement"
            | "for_in_statement"
            | "do_statement"
            | "for_expression"
            | "while_expression"
            | "loop_expression"
    )
}

fn is_call(kind: &str) -> bool {
    matches!(kind, "call" | "call_expression")
}

/// `receiver.method(…)`: the receiver and the method's node.
fn method_call<'n>(call: Node<'n>) -> Option<(Node<'n>, Node<'n>)> {
    let function = call.child_by_field_name("function")?;
    let (object_field, name_field) = match function.kind() {
        "attribute" => ("object", "attribute"),
        "member_expression" => ("object", "property"),
        "field_expression" => ("value", "field"),
        "selector_expression" => ("operand", "field"),
        _ => return None,
    };
    let receiver = function.child_by_field_name(object_field)?;
    let method = function.child_by_field_name(name_field)?;
    (receiver.kind() == "identifier").then_some((receiver, method))
}

/// A statement that is a method call on a variable, as a template: the
/// text before the receiver, between the receiver and the argument, and
/// after the argument (the argument is None for a call with other than one
/// argument: only the receiver varies).
struct Template {
    receiver: String,
    argument: Option<String>,
    /// `.append(` — or `.clear()` and what follows, without an argument.
    middle: String,
    after: String,
}

impl Generator<'_> {
    /// Copies of the lines' method-call statements after each loop of the
    /// lines. `nodes`: every node overlapping the lines.
    pub(super) fn insertions(&mut self, nodes: &[(Node<'_>, Option<&'static str>)]) {
        let mut receivers: BTreeSet<String> = BTreeSet::new();
        let mut templates: Vec<Template> = Vec::new();
        let mut loops: Vec<Node<'_>> = Vec::new();
        for (node, _) in nodes {
            if !self.within(*node) {
                continue;
            }
            if is_call(node.kind()) {
                if let Some((receiver, _)) = method_call(*node) {
                    receivers.insert(self.text_of(receiver).to_owned());
                }
            }
            if is_loop(node.kind()) {
                loops.push(*node);
            }
            if node.kind() == "expression_statement" {
                if let Some(template) = self.template(*node) {
                    templates.push(template);
                }
            }
        }
        let names: Vec<String> = self.names.iter().take(MAX_NAMES).cloned().collect();
        let mut statements: BTreeSet<String> = BTreeSet::new();
        for template in &templates {
            let mut these: Vec<&str> = vec![template.receiver.as_str()];
            these.extend(
                receivers
                    .iter()
                    .map(String::as_str)
                    .filter(|r| *r != template.receiver)
                    .take(MAX_RECEIVERS.saturating_sub(1)),
            );
            for receiver in these {
                let Some(own) = &template.argument else {
                    statements.insert(format!("{receiver}{}{}", template.middle, template.after));
                    continue;
                };
                for argument in std::iter::once(own).chain(names.iter()) {
                    statements.insert(format!(
                        "{receiver}{}{argument}{}",
                        template.middle, template.after
                    ));
                }
            }
        }
        for body in loops {
            let Some(indent) = self.indentation(body) else {
                continue;
            };
            let at = body.end_byte();
            for statement in &statements {
                let what = format!("after line {}: `{statement}`", self.line_of(at));
                self.push_range(at, at, format!("\n{indent}{statement}"), what, Kind::Insert);
            }
        }
    }

    fn template(&self, statement: Node<'_>) -> Option<Template> {
        let call = code_children(statement)
            .into_iter()
            .next()
            .filter(|c| is_call(c.kind()))?;
        let (receiver, _) = method_call(call)?;
        let arguments = call.child_by_field_name("arguments")?;
        let args = code_children(arguments);
        let slice = |a: usize, b: usize| self.text.get(a..b).map(str::to_owned);
        if receiver.start_byte() != statement.start_byte() {
            return None;
        }
        if let [only] = args.as_slice() {
            return Some(Template {
                receiver: self.text_of(receiver).to_owned(),
                argument: Some(self.text_of(*only).to_owned()),
                middle: slice(receiver.end_byte(), only.start_byte())?,
                after: slice(only.end_byte(), statement.end_byte())?,
            });
        }
        Some(Template {
            receiver: self.text_of(receiver).to_owned(),
            argument: None,
            middle: slice(receiver.end_byte(), statement.end_byte())?,
            after: String::new(),
        })
    }

    /// The whitespace before `node` on its line; None when code precedes
    /// it there (`else: while …`).
    fn indentation(&self, node: Node<'_>) -> Option<String> {
        let start = node.start_byte();
        let line_start = self
            .text
            .get(..start)?
            .rfind('\n')
            .map_or(0, |i| i.saturating_add(1));
        let before = self.text.get(line_start..start)?;
        before
            .chars()
            .all(|c| c == ' ' || c == '\t')
            .then(|| before.to_owned())
    }

    fn line_of(&self, byte: usize) -> u32 {
        self.index.point(byte).line.saturating_add(1)
    }
}
