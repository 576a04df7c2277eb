//! Gathers what the model sees for a rewrite (the code around the
//! selection, the file's header, definitions the selection uses, the
//! problems), redacts it, and packs it into the prompt's budget.
use std::ops::Range;
use std::path::Path;

use ropey::Rope;

use super::redact::Redacted;
use super::{prompt, scope, Plan, Problem, Reason, Refusal, Snapshot};
use crate::index::WorkspaceIndex;
use crate::model::Message;
use crate::secrets::Redactor;
use crate::syntax::Language;

/// Where the prompt's parts come from, and its limits.
pub struct Sources<'a> {
    pub index: &'a WorkspaceIndex,
    pub root: Option<&'a Path>,
    pub redactor: &'a Redactor,
    pub max_prompt_tokens: usize,
    /// A local model's context window (prompt and answer share it).
    pub context_tokens: Option<usize>,
    pub model_name: &'a str,
    pub count: &'a dyn Fn(&str) -> usize,
}

/// The prompt, the redacted selection (to put secrets back into the
/// answer), and the room the answer gets.
pub struct Prepared {
    pub messages: Vec<Message>,
    pub redacted: Redacted,
    pub output_tokens: usize,
}

/// Lines either side shown when there is no enclosing definition.
const NEARBY_LINES: usize = 20;
const MAX_NAMES: usize = 64;
const MAX_DEFINITIONS: usize = 12;

pub fn prepare(
    doc: &Snapshot<'_>,
    plan: &Plan,
    problems: &[Problem],
    sources: &Sources<'_>,
) -> Result<Prepared, Refusal> {
    let rope = &doc.rope;
    let range = plan.range.clone();
    check_size(range.len(), sources)?;
    let old = rope.byte_slice(range.clone()).to_string();
    let redactor = sources.redactor;
    let redact = |text: &str| redactor.redact(text).into_owned();
    let redacted = Redacted::new(redactor, &old);
    let count = sources.count;
    // The answer is about as long as the selection; leave room to grow.
    let output_tokens = (count(&redacted.text) * 2 + 256).clamp(512, 8192);
    let budget = match sources.context_tokens {
        Some(context) => sources
            .max_prompt_tokens
            .min(context.saturating_sub(output_tokens)),
        None => sources.max_prompt_tokens,
    };
    let around = doc
        .tree
        .as_ref()
        .and_then(|tree| scope::enclosing_definition(rope, tree, range.clone()))
        .unwrap_or_else(|| nearby_lines(rope, range.clone()));
    let lines = scope::whole_lines(rope, range.clone());
    let before = rope
        .byte_slice(around.start..lines.start.max(around.start))
        .to_string();
    let after = rope
        .byte_slice(lines.end.min(around.end)..around.end)
        .to_string();
    let around = (!before.trim().is_empty() || !after.trim().is_empty())
        .then(|| (redact(&before), redact(&after)));
    let header = doc
        .tree
        .as_ref()
        .and_then(|tree| scope::header(rope, tree, lines.clone()))
        .map(|h| redact(&rope.byte_slice(h).to_string()));
    let problem_lines: Vec<String> = problems
        .iter()
        .map(|p| redact(&describe_problem(rope, p)))
        .collect();
    let instruction = redact(&plan.instruction);
    let definitions = definitions_used(sources, doc, &old, range.clone());
    let first_line = rope.byte_to_line(range.start) + 1;
    let last_line = rope.byte_to_line(range.end.saturating_sub(1).max(range.start)) + 1;
    let parts = prompt::PromptParts {
        path: &doc.label,
        language: doc.language.map(|l| (l.name(), fence_tag(l))),
        header,
        definitions,
        around,
        problems: problem_lines,
        selection: &redacted.text,
        lines: (first_line, last_line),
        instruction: &instruction,
        from_comment: plan.comment.is_some(),
    };
    let messages = prompt::messages(&parts, budget, count).map_err(|too| {
        Refusal::new(
            Reason::TooLarge,
            format!(
                "the selection is too large for the model `{}`: the prompt needs {} tokens and \
                 its budget is {} (select less, or raise edit.max_prompt_tokens or the model's \
                 context_tokens)",
                sources.model_name, too.needed, too.budget
            ),
        )
    })?;
    Ok(Prepared {
        messages,
        redacted,
        output_tokens,
    })
}

/// Refuses a selection that cannot fit the prompt's budget whatever the
/// tokenizer, from its size alone: before it is copied, redacted and
/// tokenized (which for megabytes costs seconds and a gigabyte).
fn check_size(bytes: usize, sources: &Sources<'_>) -> Result<(), Refusal> {
    let floor = crate::model::tokens::at_least(bytes);
    let budget = sources
        .context_tokens
        .map_or(sources.max_prompt_tokens, |c| {
            c.min(sources.max_prompt_tokens)
        });
    if floor <= budget {
        return Ok(());
    }
    Err(Refusal::new(
        Reason::TooLarge,
        format!(
            "the selection is too large for the model `{}`: its {bytes} bytes are at least \
             {floor} tokens and the prompt's budget is {budget} (select less, or raise \
             edit.max_prompt_tokens or the model's context_tokens)",
            sources.model_name
        ),
    ))
}

/// `line N, severity [source code]: message`.
fn describe_problem(rope: &Rope, p: &Problem) -> String {
    let line = rope.byte_to_line(p.range.start.min(rope.len_bytes())) + 1;
    let severity = p.severity.as_deref().unwrap_or("problem");
    let origin = match (&p.source, &p.code) {
        (Some(s), Some(c)) => format!(" [{s} {c}]"),
        (Some(s), None) => format!(" [{s}]"),
        (None, Some(c)) => format!(" [{c}]"),
        (None, None) => String::new(),
    };
    let message = p.message.replace('\n', " ");
    format!("line {line}, {severity}{origin}: {message}")
}

/// Some lines either side of `range`, when no definition encloses it.
fn nearby_lines(rope: &Rope, range: Range<usize>) -> Range<usize> {
    let first = rope.byte_to_line(range.start).saturating_sub(NEARBY_LINES);
    let last =
        (rope.byte_to_line(range.end) + NEARBY_LINES).min(rope.len_lines().saturating_sub(1));
    scope::whole_lines(rope, rope.line_to_byte(first)..rope.line_to_byte(last))
}

/// One-line definitions (`path:line: signature`) of the identifiers the
/// selection uses, from the workspace index, defined outside the selection.
fn definitions_used(
    sources: &Sources<'_>,
    doc: &Snapshot<'_>,
    selection: &str,
    range: Range<usize>,
) -> Vec<String> {
    let mut names: Vec<&str> = Vec::new();
    for word in selection.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let starts_well = word
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_');
        if word.len() >= 3 && starts_well && !names.contains(&word) {
            names.push(word);
            if names.len() == MAX_NAMES {
                break;
            }
        }
    }
    let first_line = doc.rope.byte_to_line(range.start);
    let last_line = doc.rope.byte_to_line(range.end);
    let mut out = Vec::new();
    for name in names {
        for symbol in sources.index.definitions(name) {
            let line = symbol.range.0.line as usize;
            let same_file = doc.path.is_some_and(|p| p == &*symbol.path);
            if same_file && (first_line..=last_line).contains(&line) {
                continue;
            }
            if crate::secrets::is_secret_path(&symbol.path) {
                continue;
            }
            let path = match sources.root.and_then(|r| symbol.path.strip_prefix(r).ok()) {
                Some(rel) => rel.display().to_string(),
                None => symbol.path.display().to_string(),
            };
            let what = symbol
                .detail
                .as_deref()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{:?} {}", symbol.kind, symbol.name));
            let line = format!("{path}:{}: {what}", line + 1);
            out.push(sources.redactor.redact(&line).into_owned());
            if out.len() == MAX_DEFINITIONS {
                return out;
            }
        }
    }
    out
}

/// The tag a fenced block of `language` carries.
fn fence_tag(language: Language) -> &'static str {
    match language {
        Language::Tsx => "tsx",
        Language::Cpp => "cpp",
        other => other.language_id(),
    }
}
