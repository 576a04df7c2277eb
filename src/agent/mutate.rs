//! Small mechanical changes to suspected code (`agent.mutants`): an operator
//! replaced by its neighbour, a literal off by one, two arguments swapped,
//! a condition negated, a name replaced by another of the same function,
//! an operand dropped, a bound moved, a statement missing after a loop.
//! Each is a candidate fix the tests can judge in a second, without a
//! model: the program-repair tools' oldest trick (mutation operators in the
//! manner of PraPR and TBar), and the bugs a small model keeps missing —
//! `>` for `>=`, `[j, k]` for `[k, j]`, `outgoing` for `incoming` — are of
//! this kind.
//!
//! Only syntax is read (tree-sitter): the operators apply to any supported
//! language whose grammar names its nodes in the usual way (Python, Rust,
//! JavaScript/TypeScript, Go, C/C++, Java). Bounded: only the lines given,
//! at most `limit` mutants, each one replacement of one node's bytes.

mod insert;
mod nodes;
mod operands;
mod scope;

use std::collections::{BTreeSet, HashMap, HashSet};

use tree_sitter::Node;

use nodes::{
    attribute_name, builtin_twin, code_children, is_argument_list, is_binary, is_declaring_field,
    is_integer, is_parameter_list, is_target, operator_alternatives, swaps_operands,
};

use crate::position::LineIndex;
use crate::syntax::Language;

/// One mechanical change: `replacement` in place of `text[start..end]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutant {
    pub start: usize,
    pub end: usize,
    pub replacement: String,
    /// 1-based line of `start`.
    pub line: u32,
    /// What it does, for the log: "`>` → `>=`".
    pub what: String,
    /// Cheaper and likelier kinds first (see [`Kind`]).
    pub kind: Kind,
}

/// The operators, in the order they are tried: the ones that most often
/// fix a one-token bug and make few mutants come first; replacing a name
/// by every other name of the function makes the most, and comes last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Operator,
    Literal,
    Swap,
    OffByOne,
    /// An operand dropped: `1 + f(x)` → `f(x)`.
    Delete,
    Builtin,
    Condition,
    /// A comparison's operator and bound: `n == 0` → `n <= 1`.
    Boundary,
    Attribute,
    Name,
    /// One of the function's method calls copied after a loop.
    Insert,
    /// An argument `x` → `x - y`, `x + y` for each other variable `y`.
    Combine,
}

impl Mutant {
    /// The text with this change made.
    pub fn apply(&self, text: &str) -> Option<String> {
        let before = text.get(..self.start)?;
        let after = text.get(self.end..)?;
        Some(format!("{before}{}{after}", self.replacement))
    }
}

/// Mutants of the lines `lines` (1-based, inclusive) of `text`, cheapest
/// kinds first, at most `limit`. None for a language without a grammar
/// here or a text that does not parse.
pub fn mutants(lang: Language, text: &str, lines: (u32, u32), limit: usize) -> Vec<Mutant> {
    let Some(tree) = crate::syntax::parse_str(lang, text, None) else {
        return Vec::new();
    };
    // Lines as byte offsets (LSP lines, as the suspects' are: `position.rs`).
    let index = LineIndex::new(text);
    let lo = index.line_start(lines.0.saturating_sub(1) as usize);
    let hi = index.line_start(lines.1 as usize);
    let mut gen = Generator {
        text,
        lang,
        index: &index,
        lo,
        hi,
        out: Vec::new(),
        seen: HashSet::new(),
        per_kind: HashMap::new(),
        limit,
        names: BTreeSet::new(),
        attributes: BTreeSet::new(),
        scope_names: HashMap::new(),
    };
    // Each node with the field it fills in its parent (a cursor knows it;
    // asking a node would scan its siblings: quadratic in a long block).
    let mut nodes: Vec<(Node<'_>, Option<&'static str>)> = Vec::new();
    let mut cursor = tree.root_node().walk();
    'walk: loop {
        let node = cursor.node();
        if node.end_byte() > lo && node.start_byte() < hi {
            nodes.push((node, cursor.field_name()));
            if cursor.goto_first_child() {
                continue;
            }
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    // Names and attributes first: the name operators draw from them.
    for (node, field) in &nodes {
        gen.collect_names(*node, *field);
    }
    for (node, field) in &nodes {
        if gen.within(*node) {
            gen.visit(*node, *field);
        }
    }
    gen.insertions(&nodes);
    let mut out = gen.out;
    // Stable: within a kind, the order of the code.
    out.sort_by_key(|m| m.kind);
    out.truncate(limit);
    out
}

struct Generator<'t> {
    text: &'t str,
    lang: Language,
    index: &'t LineIndex<'t>,
    /// The bytes of the lines to change.
    lo: usize,
    hi: usize,
    out: Vec<Mutant>,
    seen: HashSet<(usize, usize, String)>,
    per_kind: HashMap<Kind, usize>,
    limit: usize,
    /// Variables of the lines: names read or bound there.
    names: BTreeSet<String>,
    /// Attribute (field, property) names used in the lines.
    attributes: BTreeSet<String>,
    /// Each function's variables counted, by the function's node id.
    scope_names: HashMap<usize, HashMap<String, usize>>,
}

/// The most names one occurrence is replaced by.
const MAX_NAMES: usize = 12;

impl<'t> Generator<'t> {
    fn within(&self, node: Node<'_>) -> bool {
        node.start_byte() >= self.lo && node.end_byte() <= self.hi
    }

    fn text_of(&self, node: Node<'_>) -> &'t str {
        self.text.get(node.byte_range()).unwrap_or_default()
    }

    fn push(&mut self, node: Node<'_>, replacement: String, what: String, kind: Kind) {
        self.push_range(node.start_byte(), node.end_byte(), replacement, what, kind);
    }

    fn push_range(
        &mut self,
        start: usize,
        end: usize,
        replacement: String,
        what: String,
        kind: Kind,
    ) {
        if self.text.get(start..end) == Some(replacement.as_str()) {
            return;
        }
        // Each kind is bounded alone, so a huge range cannot starve the
        // cheap kinds nor fill memory with names.
        let count = self.per_kind.entry(kind).or_insert(0);
        if *count >= self.limit || !self.seen.insert((start, end, replacement.clone())) {
            return;
        }
        *count += 1;
        let line = self.index.point(start).line.saturating_add(1);
        self.out.push(Mutant {
            start,
            end,
            replacement,
            line,
            what,
            kind,
        });
    }

    fn is_variable(&self, node: Node<'_>, field: Option<&str>) -> bool {
        if node.kind() != "identifier" {
            return false;
        }
        if is_declaring_field(field) {
            return false;
        }
        !matches!(self.text_of(node), "self" | "this" | "cls" | "super")
    }

    fn collect_names(&mut self, node: Node<'_>, field: Option<&str>) {
        let parent_kind = node.parent().map(|p| p.kind()).unwrap_or_default();
        let parameter = node.kind() == "identifier" && is_parameter_list(parent_kind);
        if self.is_variable(node, field) || parameter {
            self.names.insert(self.text_of(node).to_owned());
        }
        if let Some(attribute) = attribute_name(node, field) {
            self.attributes.insert(self.text_of(attribute).to_owned());
        }
    }

    fn visit(&mut self, node: Node<'_>, field: Option<&str>) {
        let kind = node.kind();
        let parent_kind = node.parent().map(|p| p.kind()).unwrap_or_default();
        if !node.is_named() && is_binary(parent_kind) {
            self.operator(node);
        }
        if is_binary(kind) {
            self.swap_operands(node);
            self.delete_operand(node);
            self.operand_off_by_one(node);
            self.boundary(node);
        }
        self.empty_base_case(node);
        self.returned_sum(node);
        if is_integer(kind) {
            self.integer(node);
        }
        if matches!(kind, "true" | "false" | "boolean_literal") {
            let flipped = match self.text_of(node) {
                "True" => "False",
                "False" => "True",
                "true" => "false",
                "false" => "true",
                _ => "",
            };
            if !flipped.is_empty() {
                let what = format!("`{}` → `{flipped}`", self.text_of(node));
                self.push(node, flipped.to_owned(), what, Kind::Literal);
            }
        }
        if is_argument_list(kind) || matches!(kind, "tuple" | "tuple_expression") {
            self.swap_adjacent(code_children(node));
        }
        if kind == "subscript" {
            // Python's `a[i, j]`: the indices are the node's own children.
            let mut cursor = node.walk();
            let indices: Vec<Node<'_>> = node
                .children_by_field_name("subscript", &mut cursor)
                .collect();
            self.swap_adjacent(indices);
        }
        if self.is_index_or_argument(node, field) {
            self.off_by_one(node);
        }
        if kind == "identifier" && field == Some("function") {
            if let Some(twin) = builtin_twin(self.text_of(node)) {
                let what = format!("`{}` → `{twin}`", self.text_of(node));
                self.push(node, twin.to_owned(), what, Kind::Builtin);
            }
        }
        if field == Some("condition") {
            self.negate(node);
        }
        if kind == "not_operator" || (kind == "unary_expression" && self.is_logical_not(node)) {
            if let Some(operand) = code_children(node).last() {
                let operand_text = self.text_of(*operand).to_owned();
                let what = format!("`{}` → `{operand_text}`", self.text_of(node));
                self.push(node, operand_text, what, Kind::Condition);
            }
        }
        if let Some(attribute) = attribute_name(node, field) {
            self.attribute(attribute);
        }
        if self.is_variable(node, field)
            && !is_parameter_list(parent_kind)
            && !is_target(node, field)
        {
            self.name(node);
            if is_argument_list(parent_kind) {
                self.combine(node);
            }
        }
        // A computed operand may be a value the function already holds:
        // `get(seen, node) + cost` → `distance + cost`.
        if is_binary(parent_kind)
            && matches!(field, Some("left" | "right"))
            && matches!(
                kind,
                "call"
                    | "call_expression"
                    | "subscript"
                    | "subscript_expression"
                    | "index_expression"
            )
        {
            self.name(node);
        }
    }

    fn operator(&mut self, node: Node<'_>) {
        let op = self.text_of(node);
        for alternative in operator_alternatives(op) {
            // Python has no `===`; Rust has no `//` operator (a comment).
            if self.lang != Language::Python && *alternative == "//" {
                continue;
            }
            // `1 + f(x)` → `1 * f(x)` is `f(x)` in disguise: the operand
            // deletion makes the plain one.
            if self.makes_an_identity(node, alternative) {
                continue;
            }
            let what = format!("`{op}` → `{alternative}`");
            self.push(node, (*alternative).to_owned(), what, Kind::Operator);
        }
    }

    /// Whether `alternative` for the operator token `op_node` leaves its
    /// expression equal to one operand (`1 * x`, `x / 1`, `0 + x`, `x - 0`).
    fn makes_an_identity(&self, op_node: Node<'_>, alternative: &str) -> bool {
        let Some(parent) = op_node.parent() else {
            return false;
        };
        let left = parent.child_by_field_name("left").map(|n| self.text_of(n));
        let right = parent.child_by_field_name("right").map(|n| self.text_of(n));
        is_identity(alternative, left, right)
    }

    fn swap_operands(&mut self, node: Node<'_>) {
        let (Some(left), Some(op), Some(right)) = (
            node.child_by_field_name("left"),
            node.child_by_field_name("operator"),
            node.child_by_field_name("right"),
        ) else {
            return;
        };
        if !swaps_operands(self.text_of(op)) || node.kind().contains("assign") {
            return;
        }
        let between = self
            .text
            .get(left.end_byte()..right.start_byte())
            .unwrap_or_default();
        let (l, r) = (self.text_of(left), self.text_of(right));
        let replacement = format!("{r}{between}{l}");
        let what = format!("`{}` → `{replacement}`", self.text_of(node));
        self.push(node, replacement, what, Kind::Swap);
    }

    /// Each pair of neighbours among `items` exchanged (the first four).
    fn swap_adjacent(&mut self, items: Vec<Node<'_>>) {
        let items: Vec<Node<'_>> = items
            .into_iter()
            .filter(|c| {
                !matches!(
                    c.kind(),
                    "keyword_argument" | "list_splat" | "dictionary_splat"
                )
            })
            .take(4)
            .collect();
        for pair in items.windows(2) {
            let [a, b] = pair else { continue };
            let between = self
                .text
                .get(a.end_byte()..b.start_byte())
                .unwrap_or_default();
            let (at, bt) = (self.text_of(*a), self.text_of(*b));
            let replacement = format!("{bt}{between}{at}");
            let what = format!("`{at}{between}{bt}` → `{replacement}`");
            self.push_range(a.start_byte(), b.end_byte(), replacement, what, Kind::Swap);
        }
    }

    fn integer(&mut self, node: Node<'_>) {
        let digits = self.text_of(node);
        let Ok(value) = digits.parse::<u32>() else {
            return;
        };
        let mut alternatives = vec![value.saturating_add(1)];
        if value > 0 {
            alternatives.push(value - 1);
        }
        for alternative in alternatives {
            // `1 + f(x)` → `0 + f(x)`: the operand deletion's `f(x)`.
            if self.literal_makes_an_identity(node, alternative) {
                continue;
            }
            let what = format!("`{digits}` → `{alternative}`");
            self.push(node, alternative.to_string(), what, Kind::Literal);
        }
    }

    /// Whether the integer `node`, as `value`, leaves its binary expression
    /// equal to the other operand (`0 + x`, `x - 0`, `1 * x`, `x / 1`, `x ** 1`).
    fn literal_makes_an_identity(&self, node: Node<'_>, value: u32) -> bool {
        let Some(parent) = node.parent().filter(|p| is_binary(p.kind())) else {
            return false;
        };
        let Some(op) = parent.child_by_field_name("operator") else {
            return false;
        };
        let value = value.to_string();
        let side = |field: &str| {
            parent
                .child_by_field_name(field)
                .map(|n| match n.id() == node.id() {
                    true => value.as_str(),
                    false => self.text_of(n),
                })
        };
        is_identity(self.text_of(op), side("left"), side("right"))
    }

    /// A name or call that is an argument or an index: `f(x)`, `a[x]`.
    fn is_index_or_argument(&self, node: Node<'_>, field: Option<&str>) -> bool {
        if !matches!(
            node.kind(),
            "identifier" | "call" | "call_expression" | "field_expression" | "attribute"
        ) {
            return false;
        }
        let Some(parent) = node.parent() else {
            return false;
        };
        is_argument_list(parent.kind())
            || matches!(field, Some("subscript" | "index"))
            || (parent.kind() == "index_expression"
                && parent.named_child(1).map(|c| c.id()) == Some(node.id()))
    }

    fn off_by_one(&mut self, node: Node<'_>) {
        let text = self.text_of(node).to_owned();
        for op in ["+", "-"] {
            let replacement = format!("{text} {op} 1");
            let what = format!("`{text}` → `{replacement}`");
            self.push(node, replacement, what, Kind::OffByOne);
        }
    }

    fn is_logical_not(&self, node: Node<'_>) -> bool {
        node.child(0)
            .is_some_and(|c| !c.is_named() && self.text_of(c) == "!")
    }

    fn negate(&mut self, condition: Node<'_>) {
        let text = self.text_of(condition);
        let replacement = match self.lang {
            Language::Python => format!("not ({text})"),
            // `if (c)` in the C family: the parentheses are the condition's.
            _ if condition.kind() == "parenthesized_expression" => format!("(!{text})"),
            _ => format!("!({text})"),
        };
        let what = format!("`{text}` → `{replacement}`");
        self.push(condition, replacement, what, Kind::Condition);
    }

    fn attribute(&mut self, attribute: Node<'_>) {
        let current = self.text_of(attribute);
        for other in others_than(&self.attributes, current) {
            let what = format!("`.{current}` → `.{other}`");
            self.push(attribute, other, what, Kind::Attribute);
        }
    }

    fn combine(&mut self, node: Node<'_>) {
        let current = self.text_of(node);
        for other in others_than(&self.names, current) {
            for op in ["-", "+"] {
                let replacement = format!("{current} {op} {other}");
                let what = format!("`{current}` → `{replacement}`");
                self.push(node, replacement, what, Kind::Combine);
            }
        }
    }

    fn name(&mut self, node: Node<'_>) {
        if scope::leaves_a_name_unused(&mut self.scope_names, self.text, node) {
            return;
        }
        let current = self.text_of(node);
        for other in others_than(&self.names, current) {
            let what = format!("`{current}` → `{other}`");
            self.push(node, other, what, Kind::Name);
        }
    }
}

/// Whether `left op right` is one of its operands (`0 + x`, `x - 0`,
/// `1 * x`, `x / 1`, `x ** 1`): the operand deletion's change in disguise.
fn is_identity(op: &str, left: Option<&str>, right: Option<&str>) -> bool {
    match op {
        "+" => left == Some("0") || right == Some("0"),
        "*" => left == Some("1") || right == Some("1"),
        "-" => right == Some("0"),
        "/" | "//" | "**" => right == Some("1"),
        _ => false,
    }
}

/// The names of `pool` other than `current`, at most [`MAX_NAMES`].
fn others_than(pool: &BTreeSet<String>, current: &str) -> Vec<String> {
    pool.iter()
        .filter(|n| n.as_str() != current)
        .take(MAX_NAMES)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
