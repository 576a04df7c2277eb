//! The completion prompt's context: the prefix and suffix windows around the
//! cursor, and ranked snippets from other files, within a token budget and a
//! hard deadline. Knows nothing about LSP: byte offsets, paths and text.
//!
//! # Budget
//!
//! `max_prompt_tokens` less [`TEMPLATE_RESERVE_TOKENS`] (the template's
//! markers and labels) is split by [`tokens::split_budget`]: the prefix first,
//! then the suffix, then the snippets. Below [`MIN_TOTAL_FOR_SNIPPETS`] no
//! snippets are offered: in a prompt that small the cursor's own code is
//! worth more than anything from elsewhere, so snippets are dropped first.
//!
//! # Snippets, best first
//!
//! 1. Definitions of the identifiers near the cursor (cursor line first, then
//!    up to [`NEAR_LINES`] lines above) and of the names in the enclosing
//!    function's signature, looked up in the workspace index.
//! 2. Ranges recently edited in other open files, most recent first.
//! 3. Windows of open files similar to the code before the cursor (Jaccard
//!    over identifier sets).
//! 4. Outlines (top-level signatures) of the modules the current file imports.
//!
//! Overlapping snippets of one file are dropped (the better-ranked one stays);
//! the current document appears only through definitions outside its
//! windows. Errors reported within ±[`DIAGNOSTIC_LINE_RADIUS`] lines of the
//! cursor form one more snippet, labelled `<current path> (errors)`, whose
//! lines are comments in the file's syntax (`// line 12: expected ';'`). It
//! is packed first (it is small and says what the user is fixing) but placed
//! last, right before the current file, where the model reads it last.
//!
//! # Secrets
//!
//! Secret files (`.env`, keys: [`is_secret_path`]) never feed the context:
//! open secret buffers are not offered as recent edits or similar code,
//! and no snippet from such a file is kept. The finished prompt is redacted
//! by the caller ([`super::secrets`]).
//!
//! # Time
//!
//! Windows are always produced. Snippet sources run one after another and the
//! deadline is checked between sources, files and names; once it has passed,
//! gathering stops and the report says `timed_out`. Only open buffers are
//! scanned for similar code, and at most [`MAX_DISK_READS`] files are read
//! from disk, so a call stays within milliseconds on a large workspace.
mod imports;
mod similar;
mod snippets;
mod windows;

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::index::WorkspaceIndex;
use crate::model::tokens::{self, TokenCounter};
use crate::model::{FimRequest, GenOptions, Snippet};
use crate::secrets::is_secret_path;
use crate::syntax::Language;

/// Tokens kept back from `max_prompt_tokens` for the template's markers.
pub const TEMPLATE_RESERVE_TOKENS: usize = 32;
/// Smallest budget (after the reserve) that gets any snippets.
pub const MIN_TOTAL_FOR_SNIPPETS: usize = 128;
/// Lines above the cursor line whose identifiers are looked up.
pub const NEAR_LINES: usize = 5;
/// Diagnostics this many lines from the cursor line (or closer) are shown.
pub const DIAGNOSTIC_LINE_RADIUS: usize = 2;
/// Files read from disk per call, for definitions not in an open buffer.
pub const MAX_DISK_READS: usize = 5;
/// Longest snippet, in lines.
pub const MAX_SNIPPET_LINES: usize = 40;

/// Another open document the user has been working in.
pub struct OpenFile<'a> {
    /// Absolute path.
    pub path: &'a Path,
    pub language: Option<Language>,
    pub text: &'a str,
    /// Byte ranges recently edited (most recent first), and the range last
    /// viewed/cursor area if known.
    pub recent_edits: &'a [Range<usize>],
    /// Monotonic "last touched" rank: 0 = most recent.
    pub recency: usize,
}

/// Everything [`build`] looks at.
pub struct ContextInput<'a> {
    /// The current document.
    pub text: &'a str,
    /// Byte offset of the cursor (moved back to a char boundary if inside one).
    pub cursor: usize,
    /// The cursor's 0-based line, when the caller knows it (from its rope):
    /// else the newlines before the cursor are counted, in a large file the
    /// longest scan of the build.
    pub cursor_line: Option<usize>,
    /// Absolute path of the current document.
    pub path: Option<&'a Path>,
    /// Workspace root, for relative labels.
    pub root: Option<&'a Path>,
    pub language: Option<Language>,
    pub index: Option<&'a WorkspaceIndex>,
    /// Other open documents (not the current one).
    pub open_files: &'a [OpenFile<'a>],
    /// Latest errors of this document: (0-based line, message).
    pub diagnostics: &'a [(usize, String)],
    pub max_prompt_tokens: usize,
    pub counter: &'a dyn TokenCounter,
    /// Hard deadline for snippet gathering; windows are always produced.
    pub deadline: Instant,
}

/// The context of one completion request.
#[derive(Clone, Debug)]
pub struct Context {
    pub prefix: String,
    pub suffix: String,
    /// Labelled by workspace-relative path, ranked best first (the errors
    /// snippet, when there is one, last).
    pub snippets: Vec<Snippet>,
    /// What was used and what was cut, for logs and tests.
    pub report: ContextReport,
}

/// What [`build`] used. Token counts are as budgeted: line by line, which
/// for the estimator is never less than counting the text whole.
#[derive(Debug, Default, Clone)]
pub struct ContextReport {
    pub prefix_tokens: usize,
    pub suffix_tokens: usize,
    /// The snippets' text plus their labels' overhead.
    pub snippet_tokens: usize,
    /// (source kind, label) of each snippet kept, in the snippets' order.
    /// Kinds: `definition`, `recent_edit`, `similar`, `import`, `diagnostics`.
    pub sources: Vec<(String, String)>,
    pub timed_out: bool,
    pub elapsed: Duration,
}

/// Builds the prompt context for `input` (see the module documentation).
/// Secret files ([`is_secret_path`]) never feed it: open secret buffers are
/// left out, and so is any snippet (a definition, an import) from one.
pub fn build(input: &ContextInput<'_>) -> Context {
    let open: Vec<OpenFile<'_>> = input
        .open_files
        .iter()
        .filter(|f| !is_secret_path(f.path))
        .map(|f| OpenFile { ..*f })
        .collect();
    let input = &ContextInput {
        open_files: &open,
        ..*input
    };
    let started = Instant::now();
    let counter = input.counter;
    let total = input
        .max_prompt_tokens
        .saturating_sub(TEMPLATE_RESERVE_TOKENS);
    let cursor = windows::floor_char_boundary(input.text, input.cursor);
    let (before, after) = input.text.split_at(cursor);

    // The widest windows any split could give: what the prefix and suffix
    // need, and the lines of the current file the prompt may already show.
    let cursor_line = input
        .cursor_line
        .unwrap_or_else(|| windows::count_newlines(before));
    debug_assert_eq!(cursor_line, windows::count_newlines(before));
    let widest = windows::Windows::widest(before, after, cursor_line, total, counter);

    let mut timed_out = false;
    let mut gathered = snippets::Gathered::default();
    if total >= MIN_TOTAL_FOR_SNIPPETS {
        let mut gatherer =
            snippets::Gatherer::new(input, cursor, cursor_line, widest.shown_lines.clone());
        timed_out = gatherer.run();
        gathered = gatherer.finish();
    }
    // Packing order: the errors first (small, most pertinent), then the rest
    // by rank.
    let mut order: Vec<(&'static str, Snippet)> = Vec::new();
    if let Some(errors) = gathered.errors.take() {
        order.push(("diagnostics", errors));
    }
    order.append(&mut gathered.ranked);
    order.retain(|(_, s)| !is_secret_path(Path::new(&s.path)));
    let snippet_need: usize = order.iter().map(|(_, s)| snippet_cost(s, counter)).sum();

    let budget = tokens::split_budget(total, widest.prefix_need, widest.suffix_need, snippet_need);
    let (prefix, prefix_tokens) = widest.prefix(budget.prefix, counter);
    let (suffix, suffix_tokens) = widest.suffix(budget.suffix, counter);
    let plain: Vec<Snippet> = order.iter().map(|(_, s)| s.clone()).collect();
    let packed = tokens::take_snippets(&plain, budget.snippets, counter);

    // take_snippets keeps a leading run of its input, so kinds line up.
    let mut kept: Vec<(&'static str, Snippet)> =
        order.iter().map(|(kind, _)| *kind).zip(packed).collect();
    if kept.first().is_some_and(|(kind, _)| *kind == "diagnostics") {
        let errors = kept.remove(0);
        kept.push(errors);
    }

    let report = ContextReport {
        prefix_tokens,
        suffix_tokens,
        snippet_tokens: kept.iter().map(|(_, s)| snippet_cost(s, counter)).sum(),
        sources: kept
            .iter()
            .map(|(kind, s)| (kind.to_string(), s.path.clone()))
            .collect(),
        timed_out,
        elapsed: started.elapsed(),
    };
    Context {
        prefix: prefix.to_string(),
        suffix: suffix.to_string(),
        snippets: kept.into_iter().map(|(_, s)| s).collect(),
        report,
    }
}

impl Context {
    /// A [`FimRequest`] from this context. `path` is the current file's
    /// workspace-relative path (see [`relative_label`]) and `repo_name` the
    /// root's directory name (see [`repo_name`]).
    pub fn into_fim_request(
        self,
        path: Option<String>,
        repo_name: Option<String>,
        options: GenOptions,
    ) -> FimRequest {
        FimRequest {
            prefix: self.prefix,
            suffix: self.suffix,
            snippets: self.snippets,
            path,
            repo_name,
            options,
        }
    }
}

/// `path` relative to `root` with `/` separators, or the whole path when it
/// is outside the root (or there is none).
pub fn relative_label(path: &Path, root: Option<&Path>) -> String {
    let rel = root
        .and_then(|root| path.strip_prefix(root).ok())
        .filter(|rel| !rel.as_os_str().is_empty())
        .unwrap_or(path);
    let label = rel.to_string_lossy();
    if std::path::MAIN_SEPARATOR == '/' {
        label.into_owned()
    } else {
        label.replace(std::path::MAIN_SEPARATOR, "/")
    }
}

/// The workspace root's directory name, for repository-level templates.
pub fn repo_name(root: &Path) -> Option<String> {
    root.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// What a snippet costs in the prompt, as [`tokens::take_snippets`] counts it.
fn snippet_cost(snippet: &Snippet, counter: &dyn TokenCounter) -> usize {
    tokens::SNIPPET_OVERHEAD_TOKENS
        + counter.count(&snippet.path)
        + windows::lines_cost(&snippet.text, counter)
}
