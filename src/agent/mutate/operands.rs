//! Operators on an expression's operands and bounds, the mutation-testing
//! classics beyond one token: an operand deleted (`1 + f(x)` → `f(x)`,
//! PIT's arithmetic and conditional operand deletion), an operand off by
//! one inside arithmetic (`len(d) * [0]` → `(len(d) - 1) * [0]`), a
//! comparison's operator and bound both moved (`n == 0` → `n <= 1`: a
//! recursion's base case one short), and a recursion's empty base case
//! that should hold the empty result (`return []` → `return [[]]`), and a
//! returned collection joined with one already gathered.

use tree_sitter::Node;

use super::nodes::{code_children, is_integer};
use super::{scope, Generator, Kind};

/// Operators whose operand may be dropped (not comparisons: `a < b` → `a`
/// changes the type; not assignments).
fn drops_operands(op: &str) -> bool {
    matches!(
        op,
        "+" | "-" | "*" | "/" | "//" | "%" | "**" | "and" | "or" | "&&" | "||"
    )
}

/// Where an operand one off is not the whole one off (`a + b - 1` is the
/// literal operator's `a + b` moved).
fn scales(op: &str) -> bool {
    matches!(op, "*" | "/" | "//" | "%" | "**")
}

fn is_comparison(op: &str) -> bool {
    matches!(op, "<" | "<=" | ">" | ">=" | "==" | "===")
}

/// What an operand must be to be moved by one: a value, not a literal
/// (the literal operator moves those) nor a string.
fn counts(kind: &str) -> bool {
    matches!(
        kind,
        "identifier"
            | "call"
            | "call_expression"
            | "parenthesized_expression"
            | "subscript"
            | "subscript_expression"
            | "index_expression"
            | "attribute"
            | "member_expression"
            | "field_expression"
    )
}

impl<'t> Generator<'t> {
    /// The parts of a binary expression: left, operator, right.
    fn parts<'n>(&self, node: Node<'n>) -> Option<(Node<'n>, &'t str, Node<'n>)> {
        if node.kind().contains("assign") {
            return None;
        }
        if node.kind() == "comparison_operator" {
            // Python's comparisons chain (`a < b < c`) and name no fields:
            // only the simple one, its operator the token between.
            let [left, right] = code_children(node)[..] else {
                return None;
            };
            let op = self.text.get(left.end_byte()..right.start_byte())?.trim();
            return Some((left, op, right));
        }
        let left = node.child_by_field_name("left")?;
        let op = node.child_by_field_name("operator")?;
        let right = node.child_by_field_name("right")?;
        Some((left, self.text_of(op), right))
    }

    /// `a + b` → `a` and → `b`, unless what is dropped was the only read
    /// of a variable (the anti-pattern [`scope`] guards against).
    pub(super) fn delete_operand(&mut self, node: Node<'_>) {
        let Some((left, op, right)) = self.parts(node) else {
            return;
        };
        if !drops_operands(op) {
            return;
        }
        for (kept, dropped) in [(left, right), (right, left)] {
            if scope::leaves_a_name_unused(&mut self.scope_names, self.text, dropped) {
                continue;
            }
            let kept_text = self.text_of(kept).to_owned();
            let what = format!("`{}` → `{kept_text}`", self.text_of(node));
            self.push(node, kept_text, what, Kind::Delete);
        }
    }

    /// An operand of a product, quotient or power moved by one, in parentheses so that the
    /// operator around it still applies to the whole.
    pub(super) fn operand_off_by_one(&mut self, node: Node<'_>) {
        let Some((left, op, right)) = self.parts(node) else {
            return;
        };
        if !scales(op) {
            return;
        }
        for operand in [left, right] {
            if !counts(operand.kind()) {
                continue;
            }
            let text = self.text_of(operand);
            // `(len(d))` → `(len(d) - 1)`, not `((len(d)) - 1)`.
            let inner = if operand.kind() == "parenthesized_expression" {
                text.strip_prefix('(')
                    .and_then(|t| t.strip_suffix(')'))
                    .unwrap_or(text)
            } else {
                text
            };
            for sign in ["-", "+"] {
                let replacement = format!("({inner} {sign} 1)");
                let what = format!("`{text}` → `{replacement}`");
                self.push(operand, replacement, what, Kind::OffByOne);
            }
        }
    }

    /// `x == 0` → `x <= 1`, `x >= -1`…: each other comparison with the
    /// bound one off, where one side is an integer literal.
    pub(super) fn boundary(&mut self, node: Node<'_>) {
        let Some((left, op, right)) = self.parts(node) else {
            return;
        };
        if !is_comparison(op) {
            return;
        }
        let (value, literal, literal_on_right) = if is_integer(right.kind()) {
            (left, right, true)
        } else if is_integer(left.kind()) {
            (right, left, false)
        } else {
            return;
        };
        let Ok(bound) = self.text_of(literal).parse::<i64>() else {
            return;
        };
        let value = self.text_of(value).to_owned();
        let whole = self.text_of(node).to_owned();
        let strict_equality = op == "===";
        for other in ["<", "<=", ">", ">=", "=="] {
            let other = if other == "==" && strict_equality {
                "==="
            } else {
                other
            };
            if other == op {
                continue;
            }
            for moved in [bound - 1, bound + 1] {
                let replacement = if literal_on_right {
                    format!("{value} {other} {moved}")
                } else {
                    format!("{moved} {other} {value}")
                };
                let what = format!("`{whole}` → `{replacement}`");
                self.push(node, replacement, what, Kind::Boundary);
            }
        }
    }

    /// `return []` → `return [[]]`: the base case of a recursion that
    /// builds lists of lists (subsets, sequences, permutations) holds the
    /// one empty result, not none.
    pub(super) fn empty_base_case(&mut self, node: Node<'_>) {
        if !matches!(node.kind(), "list" | "array") || node.named_child_count() > 0 {
            return;
        }
        let in_return = node
            .parent()
            .is_some_and(|p| matches!(p.kind(), "return_statement" | "return_expression"));
        if !in_return {
            return;
        }
        let text = self.text_of(node);
        if text != "[]" {
            return;
        }
        self.push(
            node,
            "[[]]".to_owned(),
            "`[]` → `[[]]`".to_owned(),
            Kind::Literal,
        );
    }
}

impl Generator<'_> {
    /// `return [f(x) for x in xs]` → `return ys + [f(x) for x in xs]` and
    /// `… + ys`: a result that drops what was already gathered (a
    /// recursion's results returned without those of the rest).
    pub(super) fn returned_sum(&mut self, node: Node<'_>) {
        let returned = node
            .parent()
            .is_some_and(|p| matches!(p.kind(), "return_statement" | "return_expression"));
        let builds = matches!(
            node.kind(),
            "list_comprehension" | "list" | "array" | "call" | "call_expression"
        );
        if !returned || !builds {
            return;
        }
        let current = self.text_of(node).to_owned();
        for other in super::others_than(&self.names, &current) {
            for replacement in [
                format!("{other} + {current}"),
                format!("{current} + {other}"),
            ] {
                let what = format!("`{current}` → `{replacement}`");
                self.push(node, replacement, what, Kind::Combine);
            }
        }
    }
}
