//! The edit engine: rewrites a range of a document as instructed (or fixes
//! the problems reported in it) with the `edit` model, and returns the
//! minimal edits that turn the old text into the new.
//!
//! Knows nothing of LSP: byte ranges of a rope in, byte ranges out. The
//! steps: [`plan`] settles the range (whole lines; a quick fix grows to the
//! smallest enclosing function) and the instruction (given, or from a
//! `fettle:` comment); [`rewrite`] builds the prompt ([`prompt`]), streams
//! the model's answer (cancellable), extracts and fits the code
//! ([`answer`]), refuses answers that add syntax errors after one retry
//! with the errors fed back ([`check`]), and diffs the result into hunks
//! ([`hunks`]). Applying them to the editor is the caller's business.
pub mod answer;
pub mod check;
pub mod gather;
mod graft;
mod guard;
pub use guard::code_fingerprint;
pub mod hunks;
pub mod instruction;
pub mod prompt;
pub mod redact;
pub mod scope;
mod stats;

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use ropey::Rope;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tree_sitter::Tree;

use crate::index::WorkspaceIndex;
use crate::model::{ChatEvent, ChatRequest, GenOptions, Message, Model};
use crate::secrets::Redactor;
use crate::syntax::Language;

pub use hunks::{rebase, Hunk};
pub use stats::{Report, Stats};

/// The instruction of a quick fix with none of its own.
pub const FIX_INSTRUCTION: &str =
    "Fix the problems listed above. Change nothing else unless the fix needs it.";

/// The document as it was when the rewrite was asked for.
pub struct Snapshot<'a> {
    pub path: Option<&'a Path>,
    /// How the model sees the file's name (relative to the workspace root).
    pub label: String,
    pub language: Option<Language>,
    pub rope: Rope,
    /// Parsed from `rope` (not an older text), when there is a grammar.
    pub tree: Option<Tree>,
}

/// A problem reported in the document (a diagnostic from any source).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problem {
    pub range: Range<usize>,
    pub severity: Option<String>,
    pub source: Option<String>,
    pub code: Option<String>,
    pub message: String,
}

/// What the user asked for.
#[derive(Clone, Debug, Default)]
pub struct Ask {
    /// Bytes of the snapshot; empty: the function around that point.
    pub range: Range<usize>,
    pub instruction: Option<String>,
    pub problems: Vec<Problem>,
}

/// What the engine needs besides the document.
pub struct Env<'a> {
    pub model: &'a Model,
    pub index: &'a WorkspaceIndex,
    /// The workspace root, for the paths the model sees.
    pub root: Option<&'a Path>,
    pub redactor: &'a Redactor,
    pub max_prompt_tokens: usize,
    /// The model's text as it streams (for a plugin's preview).
    pub text: Option<mpsc::UnboundedSender<String>>,
    pub cancel: CancellationToken,
}

/// The range and instruction a rewrite works on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub range: Range<usize>,
    pub instruction: String,
    /// The `fettle:` comment the instruction came from.
    pub comment: Option<String>,
}

/// A rewrite ready to apply.
#[derive(Clone, Debug)]
pub struct Rewrite {
    pub plan: Plan,
    pub old: String,
    pub new: String,
    /// `old` → `new` as minimal edits of the snapshot, in order.
    pub hunks: Vec<Hunk>,
    pub attempts: u32,
    pub model_time: Duration,
    /// Lines of the answer left out because only documentation was asked
    /// for and they were not (see `graft.rs`).
    pub left_out: usize,
    /// The document with the rewrite, as the syntax check parsed it: once
    /// the editor holds exactly this text, the tree saves it a reparse.
    pub checked: Option<check::Replaced>,
}

impl Rewrite {
    /// One line for the user: which lines changed, and how much.
    pub fn summary(&self, rope: &Rope, label: &str) -> String {
        let first = rope.byte_to_line(self.plan.range.start) + 1;
        let (added, removed) = self.line_counts();
        let left_out = match self.left_out {
            0 => String::new(),
            1 => "; 1 line of the answer that was not documentation left out".to_owned(),
            n => format!("; {n} lines of the answer that were not documentation left out"),
        };
        format!(
            "rewrote {label} from line {first}: {} hunk{}, +{added} −{removed} lines{left_out}",
            self.hunks.len(),
            if self.hunks.len() == 1 { "" } else { "s" }
        )
    }

    /// Lines added and removed over all hunks.
    pub fn line_counts(&self) -> (usize, usize) {
        let lines = |s: &str| s.split_inclusive('\n').count();
        let added = self.hunks.iter().map(|h| lines(&h.text)).sum();
        let removed = self
            .hunks
            .iter()
            .map(|h| {
                lines(
                    &self.old[h.range.start - self.plan.range.start
                        ..h.range.end - self.plan.range.start],
                )
            })
            .sum();
        (added, removed)
    }
}

/// What the model is told when its answer had no code.
const NO_CODE_FEEDBACK: &str = "Your answer had no code. Reply with the complete new version of the selected code in one fenced code block.";

/// Why a rewrite was not applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    NoInstruction,
    TooLarge,
    Model,
    NoCode,
    Unchanged,
    SyntaxErrors,
    LostDefinitions,
    CopiedContext,
    Secret,
    Cancelled,
    DocumentChanged,
    EditorRefused,
    Discarded,
    ModelTooSmall,
    CodeChanged,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoInstruction => "no_instruction",
            Reason::TooLarge => "too_large",
            Reason::Model => "model_error",
            Reason::NoCode => "no_code",
            Reason::Unchanged => "unchanged",
            Reason::SyntaxErrors => "syntax_errors",
            Reason::LostDefinitions => "lost_definitions",
            Reason::CopiedContext => "copied_context",
            Reason::Secret => "secret",
            Reason::Cancelled => "cancelled",
            Reason::DocumentChanged => "document_changed",
            Reason::EditorRefused => "editor_refused",
            Reason::Discarded => "discarded",
            Reason::ModelTooSmall => "model_too_small",
            Reason::CodeChanged => "code_changed",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Refusal {
    pub reason: Reason,
    /// For the user: what happened and what to do.
    pub message: String,
    pub model_time: Duration,
}

impl Refusal {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            model_time: Duration::ZERO,
        }
    }
}

/// Settles the range and the instruction. Cheap: no model, no parse.
pub fn plan(doc: &Snapshot<'_>, ask: &Ask) -> Result<Plan, Refusal> {
    let len = doc.rope.len_bytes();
    let asked = ask.range.start.min(len)..ask.range.end.clamp(ask.range.start.min(len), len);
    let range = if !ask.problems.is_empty() {
        let start = ask
            .problems
            .iter()
            .map(|p| p.range.start)
            .min()
            .unwrap_or(asked.start);
        let end = ask
            .problems
            .iter()
            .map(|p| p.range.end)
            .max()
            .unwrap_or(asked.end);
        let start = start.min(asked.start).min(len);
        scope::fix_scope(&doc.rope, doc.tree.as_ref(), start..end.max(start).min(len))
    } else if asked.is_empty() {
        scope::fix_scope(&doc.rope, doc.tree.as_ref(), asked)
    } else {
        scope::from_line_start(&doc.rope, asked)
    };
    let given = ask
        .instruction
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty());
    if let Some(instruction) = given {
        return Ok(Plan {
            range,
            instruction: instruction.to_owned(),
            comment: None,
        });
    }
    // A quick fix fixes: a `fettle:` comment in the function around the
    // problem is about something else.
    if !ask.problems.is_empty() {
        return Ok(Plan {
            range,
            instruction: FIX_INSTRUCTION.to_owned(),
            comment: None,
        });
    }
    let text = doc.rope.byte_slice(range.clone()).to_string();
    if let Some((instruction, comment)) = instruction::from_comment(&text) {
        return Ok(Plan {
            range,
            instruction,
            comment: Some(comment),
        });
    }
    Err(Refusal::new(
        Reason::NoInstruction,
        "no instruction: say what to change (your editor plugin's rewrite prompt), or write it \
         in a comment inside the selection, e.g. `# fettle: use a dict`",
    ))
}

/// Rewrites `plan.range` of `doc` with the model (see the module comment).
pub async fn rewrite(
    doc: &Snapshot<'_>,
    plan: Plan,
    problems: &[Problem],
    env: &Env<'_>,
) -> Result<Rewrite, Refusal> {
    let started = Instant::now();
    if let Some(why) = crate::model::local::catalog::too_small_for(
        env.model.config(),
        "rewrite code",
        "edit.model",
    ) {
        // Said at once: the small model would spend minutes, then fail.
        return Err(Refusal::new(Reason::ModelTooSmall, why));
    }
    let rope = &doc.rope;
    let range = plan.range.clone();
    let old = rope.byte_slice(range.clone()).to_string();
    let count = |text: &str| env.model.count_tokens(text);
    let config = env.model.config();
    let context_tokens = (config.provider == crate::config::Provider::Local)
        .then_some(config.context_tokens as usize);
    let gather::Prepared {
        mut messages,
        redacted,
        output_tokens,
    } = gather::prepare(
        doc,
        &plan,
        problems,
        &gather::Sources {
            index: env.index,
            root: env.root,
            redactor: env.redactor,
            max_prompt_tokens: env.max_prompt_tokens,
            context_tokens,
            model_name: env.model.name(),
            count: &count,
        },
    )?;
    let line_start = range.start == rope.line_to_byte(rope.byte_to_line(range.start));
    let (before, after) = (
        lines_before(rope, range.start, 3),
        lines_after(rope, range.end, 3),
    );
    let fit = answer::Fit {
        selection: &old,
        line_start,
        before: before.iter().map(String::as_str).collect(),
        after: after.iter().map(String::as_str).collect(),
        instruction_comment: plan.comment.as_deref(),
    };
    tracing::debug!(
        prepare_ms = started.elapsed().as_secs_f64() * 1000.0,
        "rewrite prompt built"
    );
    let errors_before = errors_in(doc);
    let mut model_time = Duration::ZERO;
    let mut attempts = 0;
    // Why the last answer was not applied, for the text the user watches.
    let mut retrying: Option<String> = None;
    loop {
        attempts += 1;
        if let (Some(why), Some(tx)) = (retrying.take(), &env.text) {
            // Otherwise the retry's text runs on from the refused answer's.
            let _ = tx.send(format!(
                "\n\n[not applied: {why}; asking the model again]\n\n"
            ));
        }
        let started = Instant::now();
        let asked = ask_model(env, messages.clone(), output_tokens).await;
        model_time += started.elapsed();
        let with_time = |mut refusal: Refusal| {
            refusal.model_time = model_time;
            refusal
        };
        let answer = asked.map_err(with_time)?;
        let retry = |feedback: String, messages: &mut Vec<Message>| {
            messages.push(Message::assistant(answer.clone()));
            messages.push(Message::user(feedback));
        };
        let Some(code) = answer::extract_code(&answer) else {
            if attempts == 1 {
                retry(NO_CODE_FEEDBACK.to_owned(), &mut messages);
                retrying = Some("the answer had no code".to_owned());
                continue;
            }
            return Err(with_time(Refusal::new(
                Reason::NoCode,
                format!("the model `{}` answered without code", env.model.name()),
            )));
        };
        let code = redacted
            .restore(&code)
            .map_err(|why| with_time(Refusal::new(Reason::Secret, why)))?;
        let mut new = answer::fit(&code, &fit);
        // The model's own text (redacted as it saw it), never `new`: that
        // has the secrets put back.
        tracing::debug!(answer = %answer, "rewrite answer");
        let mut left_out = 0;
        if guard::documentation_only(&plan.instruction) {
            // The answer's documentation on the code as it is (a small
            // model's docstring often comes with a changed line or a stray
            // quote); an answer without any goes to the checks as it is.
            if let Some(grafted) = graft::documentation(&old, &new, doc.language) {
                if grafted.dropped_lines > 0 {
                    tracing::info!(
                        left_out = grafted.dropped_lines,
                        "documentation kept; the answer's other changes left out"
                    );
                }
                new = grafted.text;
                left_out = grafted.dropped_lines;
            }
        }
        if new == old {
            return Err(with_time(Refusal::new(
                Reason::Unchanged,
                format!(
                    "the model `{}` returned the code unchanged",
                    env.model.name()
                ),
            )));
        }
        let hunks = hunks::hunks(&old, &new, range.start);
        let mut checked = None;
        if let Some(before) = errors_before {
            let replaced = check::replace(doc.language, rope, doc.tree.as_ref(), &hunks);
            let region = range.start..range.start + new.len();
            let found = guard::fault(
                doc,
                range.clone(),
                &replaced,
                region,
                before,
                &plan.instruction,
            );
            if let Some(mut fault) = found {
                // Unfenced text that does not parse: prose, not broken code.
                if fault.reason == Reason::SyntaxErrors && !answer::has_fenced_block(&answer) {
                    fault.reason = Reason::NoCode;
                    fault.message = format!(
                        "the model `{}` answered in prose, without code",
                        env.model.name()
                    );
                    fault.feedback = NO_CODE_FEEDBACK.to_owned();
                }
                tracing::info!(attempts, reason = fault.reason.as_str(), message = %fault.message, "rewrite answer refused");
                if attempts == 1 {
                    retry(fault.feedback, &mut messages);
                    retrying = Some(fault.message);
                    continue;
                }
                return Err(with_time(Refusal::new(
                    fault.reason,
                    format!(
                        "not applied: {}, also after one retry; the document is unchanged",
                        fault.message
                    ),
                )));
            }
            checked = Some(replaced);
        }
        tracing::debug!(
            own_ms = started.elapsed().saturating_sub(model_time).as_secs_f64() * 1000.0,
            attempts,
            "rewrite ready"
        );
        return Ok(Rewrite {
            plan,
            old,
            new,
            hunks,
            attempts,
            model_time,
            left_out,
            checked,
        });
    }
}

/// Streams one answer, forwarding its text; cancellable.
async fn ask_model(
    env: &Env<'_>,
    messages: Vec<Message>,
    max_tokens: usize,
) -> Result<String, Refusal> {
    let request = ChatRequest {
        messages,
        tools: Vec::new(),
        options: GenOptions {
            max_tokens: Some(u32::try_from(max_tokens).unwrap_or(u32::MAX)),
            temperature: Some(0.2),
            ..GenOptions::default()
        },
    };
    let mut stream = env.model.chat(request);
    let mut answer = String::new();
    loop {
        let event = tokio::select! {
            () = env.cancel.cancelled() => {
                return Err(Refusal::new(Reason::Cancelled, "cancelled"));
            }
            event = stream.next() => event,
        };
        match event {
            None | Some(Ok(ChatEvent::Stop(_))) => break,
            Some(Ok(ChatEvent::TextDelta(text))) => {
                if let Some(tx) = &env.text {
                    let _ = tx.send(text.clone());
                }
                answer.push_str(&text);
            }
            Some(Ok(_)) => {}
            Some(Err(err)) => {
                return Err(Refusal::new(
                    Reason::Model,
                    format!("the model `{}` failed: {err}", env.model.name()),
                ));
            }
        }
    }
    Ok(answer)
}

/// Syntax errors in the snapshot, when it has a grammar.
fn errors_in(doc: &Snapshot<'_>) -> Option<usize> {
    match (&doc.tree, doc.language) {
        (Some(tree), _) => Some(check::error_count(tree)),
        (None, Some(lang)) => crate::syntax::parse_rope(lang, &doc.rope, None)
            .as_ref()
            .map(check::error_count),
        (None, None) => None,
    }
}

/// Up to `n` lines just before the line `at` is in.
fn lines_before(rope: &Rope, at: usize, n: usize) -> Vec<String> {
    let line = rope.byte_to_line(at);
    (line.saturating_sub(n)..line)
        .map(|l| line_text(rope, l))
        .collect()
}

/// Up to `n` lines after `at`: from the next line, or from `at`'s own line
/// when `at` is its start.
fn lines_after(rope: &Rope, at: usize, n: usize) -> Vec<String> {
    let line = rope.byte_to_line(at);
    let first = if at == rope.line_to_byte(line) {
        line
    } else {
        line + 1
    };
    let end = (first + n).min(rope.len_lines());
    (first..end)
        .map(|l| line_text(rope, l))
        .filter(|_| first < rope.len_lines())
        .collect()
}

fn line_text(rope: &Rope, line: usize) -> String {
    rope.line(line)
        .to_string()
        .trim_end_matches(['\n', '\r'])
        .to_owned()
}
