//! The model's `search` tool: ripgrep's libraries over the workspace.
//!
//! Literal by default (models write `foo(` meaning the text), smart case,
//! `.gitignore`/`.ignore` respected, hidden, binary and secret files
//! ([`redact::is_secret_path`]) skipped. Files with more than one hard link
//! are skipped too (their other name may be `~/.env` or a key outside the
//! workspace), as `read_file` refuses them, unless `agent.allow_hardlinks`
//! ([`SearchOptions`]); each file is opened without following a symlink
//! and without blocking, and checked on the opened descriptor (a FIFO or a
//! link swapped in after the walk is not read). Output is deterministic: files in
//! path order, lines in order, the first `max_results` matching lines shown
//! and the rest counted — up to [`COUNT_LIMIT`], past which the count is a
//! lower bound and the search stops taking new files.
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkBuilder;
use parking_lot::Mutex;

use super::redact;

/// Matching lines shown when the caller has no preference.
pub const DEFAULT_MAX_RESULTS: usize = 50;
/// Matches counted before the search stops taking new files.
pub const COUNT_LIMIT: usize = 100_000;
/// A longer line is cut to a window this wide around its first match.
pub const MAX_LINE_CHARS: usize = 200;
/// Fewer files than this are searched on the calling thread.
const PARALLEL_MIN_FILES: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchArgs {
    pub pattern: String,
    /// A regular expression (Rust `regex` syntax); literal text when false.
    pub regex: bool,
    /// A file or directory to search instead of the whole root; absolute,
    /// already checked to be inside it (a relative path is taken from root).
    pub path: Option<PathBuf>,
    pub max_results: usize,
}

impl SearchArgs {
    /// Literal text over the whole root, the default cap.
    pub fn literal(pattern: impl Into<String>) -> Self {
        Self {
            pattern: pattern.into(),
            regex: false,
            path: None,
            max_results: DEFAULT_MAX_RESULTS,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchMatch {
    /// Relative to the root, `/`-separated.
    pub path: String,
    /// 1-based.
    pub line: u64,
    /// The line, end trimmed; a long line cut around its match with `…`.
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchResult {
    /// The first `max_results` matching lines, by (path, line).
    pub matches: Vec<SearchMatch>,
    /// Matching lines (a lower bound when `count_capped`).
    pub total_matches: usize,
    pub files_with_matches: usize,
    /// Text files searched (not binary, ignored, hidden or secret ones).
    pub files_searched: usize,
    /// Files with matches beyond the shown ones.
    pub files_not_shown: usize,
    /// The count stopped at [`COUNT_LIMIT`].
    pub count_capped: bool,
    /// What was searched, for [`render`](Self::render).
    pub pattern: String,
    pub regex: bool,
    /// The searched path relative to the root (`""`: the whole root).
    pub scope: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("the search pattern is empty")]
    EmptyPattern,
    #[error(
        "invalid regex `{pattern}`: {message}\n(set regex to false to search for the literal text)"
    )]
    InvalidRegex { pattern: String, message: String },
    #[error("{path} does not exist")]
    NotFound { path: String },
    #[error("{path} may hold secrets (.env, keys, credentials); it is never searched")]
    SecretPath { path: String },
    #[error(
        "{path} has {links} hard links (another name may be outside the workspace); it is not searched unless `agent.allow_hardlinks = true`"
    )]
    HardLink { path: String, links: u64 },
}

/// What the caller allows beyond the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchOptions {
    /// `agent.allow_hardlinks`: search files with several hard links.
    pub allow_hardlinks: bool,
}

/// Searches the files under `root` (or `args.path`) on disk.
pub fn search(root: &Path, args: &SearchArgs) -> Result<SearchResult, SearchError> {
    search_with_overrides(root, args, &|_| None)
}

/// [`search`], reading a file's text from `open_buffers` when it returns
/// one (an editor's unsaved buffer) instead of from disk. A walk of the
/// workspace: on the server's async worker it hands the worker on first
/// ([`crate::runtime::blocking`]).
pub fn search_with_overrides(
    root: &Path,
    args: &SearchArgs,
    open_buffers: &(dyn Fn(&Path) -> Option<String> + Sync),
) -> Result<SearchResult, SearchError> {
    search_with_options(root, args, open_buffers, SearchOptions::default())
}

/// [`search_with_overrides`] with `options` (the agent's settings).
pub fn search_with_options(
    root: &Path,
    args: &SearchArgs,
    open_buffers: &(dyn Fn(&Path) -> Option<String> + Sync),
    options: SearchOptions,
) -> Result<SearchResult, SearchError> {
    crate::runtime::blocking(|| search_here(root, args, open_buffers, options))
}

fn search_here(
    root: &Path,
    args: &SearchArgs,
    open_buffers: &(dyn Fn(&Path) -> Option<String> + Sync),
    options: SearchOptions,
) -> Result<SearchResult, SearchError> {
    if args.pattern.is_empty() {
        return Err(SearchError::EmptyPattern);
    }
    let matcher = build_matcher(args)?;
    let start = match &args.path {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => root.join(p),
        None => root.to_path_buf(),
    };
    // Empty for the whole workspace (`render` names it so).
    let scope = Some(crate::agent::paths::relative_to(root, &start))
        .filter(|s| s != ".")
        .unwrap_or_default();
    if !start.exists() {
        return Err(SearchError::NotFound { path: scope });
    }
    if start.is_file() && redact::is_secret_path(&start) {
        return Err(SearchError::SecretPath { path: scope });
    }
    if let Ok(meta) = start.metadata() {
        if meta.is_file() && meta.nlink() > 1 && !options.allow_hardlinks {
            return Err(SearchError::HardLink {
                path: scope,
                links: meta.nlink(),
            });
        }
    }
    let files = candidate_files(&start, options);
    let hits = search_files(&files, &matcher, args.max_results, open_buffers, options);

    let mut result = SearchResult {
        matches: Vec::new(),
        total_matches: 0,
        files_with_matches: 0,
        files_searched: 0,
        files_not_shown: 0,
        count_capped: hits.capped,
        pattern: args.pattern.clone(),
        regex: args.regex,
        scope,
    };
    for (path, hit) in files.iter().zip(hits.files) {
        let Some(hit) = hit else { continue };
        if hit.binary {
            continue;
        }
        result.files_searched += 1;
        if hit.count == 0 {
            continue;
        }
        result.files_with_matches += 1;
        result.total_matches += hit.count;
        let room = args.max_results.saturating_sub(result.matches.len());
        let shown = hit.lines.len().min(room);
        if shown < hit.count {
            result.files_not_shown += 1;
        }
        let rel = crate::agent::paths::relative_to(root, path);
        result.matches.extend(
            hit.lines
                .into_iter()
                .take(shown)
                .map(|(line, text)| SearchMatch {
                    path: rel.clone(),
                    line,
                    text,
                }),
        );
    }
    Ok(result)
}

impl SearchResult {
    /// What the model reads: `path:line: text` lines, then what was left
    /// out, or what was searched when nothing matched.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.matches.is_empty() && self.total_matches == 0 {
            let what = if self.regex { "regex" } else { "text" };
            let scope = if self.scope.is_empty() {
                "the workspace".to_owned()
            } else {
                self.scope.clone()
            };
            out.push_str(&format!(
                "no matches for {what} `{}` in {scope} ({} files searched; .gitignored, hidden, binary and secret files are skipped)",
                self.pattern, self.files_searched
            ));
            if !self.regex && looks_like_regex(&self.pattern) {
                out.push_str("\nthe pattern was taken literally; set regex to true to use it as a regular expression");
            }
            return out;
        }
        for m in &self.matches {
            out.push_str(&format!("{}:{}: {}\n", m.path, m.line, m.text));
        }
        let left = self.total_matches.saturating_sub(self.matches.len());
        if left > 0 {
            let at_least = if self.count_capped { "at least " } else { "" };
            out.push_str(&format!(
                "[… {at_least}{left} more matches in {} files not shown; narrow the pattern or path]\n",
                self.files_not_shown
            ));
        }
        out.truncate(out.trim_end().len());
        out
    }
}

fn looks_like_regex(pattern: &str) -> bool {
    [
        ".*", ".+", "\\b", "\\s", "\\d", "\\w", "|", "^", "$", "[", "(?",
    ]
    .iter()
    .any(|t| pattern.contains(t))
}

fn build_matcher(args: &SearchArgs) -> Result<RegexMatcher, SearchError> {
    let invalid = |message: String| SearchError::InvalidRegex {
        pattern: args.pattern.clone(),
        message,
    };
    if args.regex {
        // The regex crate's message quotes the pattern as written; grep's
        // quotes it as rewritten (wrapped in a group).
        regex::Regex::new(&args.pattern).map_err(|err| invalid(err.to_string()))?;
    }
    RegexMatcherBuilder::new()
        .case_smart(true)
        .fixed_strings(!args.regex)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|err| invalid(err.to_string()))
}

/// The files ripgrep would search under `start`, sorted; without secret
/// files, nor hard-linked ones unless allowed.
fn candidate_files(start: &Path, options: SearchOptions) -> Vec<PathBuf> {
    let mut walk = WalkBuilder::new(start);
    walk.standard_filters(true)
        // A folder that is not a git repository still means its .gitignore.
        .require_git(false)
        .follow_links(false);
    // Ignore files that are FIFOs or devices would block or flood the walk.
    if let Err(err) = crate::fsread::ignore_files::guard_walk(&mut walk, start) {
        tracing::warn!("search: not walking {}: {err}", start.display());
        return Vec::new();
    }
    let mut files: Vec<PathBuf> = walk
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .filter(|e| options.allow_hardlinks || e.metadata().is_ok_and(|m| m.nlink() <= 1))
        .map(ignore::DirEntry::into_path)
        .filter(|p| !redact::is_secret_path(p))
        .collect();
    files.sort();
    files
}

struct FileHits {
    /// (line number, rendered text), at most `max_results`.
    lines: Vec<(u64, String)>,
    count: usize,
    binary: bool,
}

struct Hits {
    /// Per file, in order; `None` for a file not searched (unreadable, or
    /// after the count limit).
    files: Vec<Option<FileHits>>,
    capped: bool,
}

/// Searches `files`, in parallel when there are many. Workers take files in
/// order and always finish the one they took, so however the count limit
/// cuts the search short, every file before the last one taken is
/// complete: the shown matches do not depend on thread timing.
fn search_files(
    files: &[PathBuf],
    matcher: &RegexMatcher,
    keep: usize,
    open_buffers: &(dyn Fn(&Path) -> Option<String> + Sync),
    options: SearchOptions,
) -> Hits {
    let results: Vec<Mutex<Option<FileHits>>> = files.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let counted = AtomicUsize::new(0);
    let work = || {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        while counted.load(Ordering::Relaxed) < COUNT_LIMIT {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(path) = files.get(i) else { break };
            let hit = search_file(&mut searcher, matcher, path, keep, open_buffers, options);
            if let Some(hit) = &hit {
                counted.fetch_add(hit.count, Ordering::Relaxed);
            }
            if let (Some(slot), Some(hit)) = (results.get(i), hit) {
                *slot.lock() = Some(hit);
            }
        }
    };
    let threads = if files.len() < PARALLEL_MIN_FILES {
        1
    } else {
        std::thread::available_parallelism().map_or(2, |n| n.get().min(8))
    };
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(work);
            }
        });
    }
    let files: Vec<Option<FileHits>> = results.into_iter().map(Mutex::into_inner).collect();
    // Every worker leaves by taking an index past the end, unless the
    // count limit stopped it first (or cut a single file short).
    let capped = next.load(Ordering::Relaxed) < files.len()
        || files.iter().flatten().any(|h| h.count >= COUNT_LIMIT);
    Hits { files, capped }
}

fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
    keep: usize,
    open_buffers: &(dyn Fn(&Path) -> Option<String> + Sync),
    options: SearchOptions,
) -> Option<FileHits> {
    let mut sink = Collect {
        matcher,
        hits: FileHits {
            lines: Vec::new(),
            count: 0,
            binary: false,
        },
        keep,
    };
    // Checked on the descriptor about to be read: what the walk saw may
    // have been swapped since.
    let file = match open_checked(path, options) {
        Ok(file) => file,
        Err(err) => {
            tracing::debug!(path = %path.display(), "search: skipped: {err}");
            return None;
        }
    };
    let done = match open_buffers(path) {
        Some(text) => searcher.search_slice(matcher, text.as_bytes(), &mut sink),
        None => searcher.search_file(matcher, &file, &mut sink),
    };
    if let Err(err) = done {
        tracing::debug!(path = %path.display(), "search: skipped: {err}");
        return None;
    }
    Some(sink.hits)
}

/// Opens a file to search: not through a symlink, without blocking (a FIFO
/// swapped in), and only a regular file with one link (unless allowed).
fn open_checked(path: &Path, options: SearchOptions) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.nlink() > 1 && !options.allow_hardlinks {
        return Err(std::io::Error::other(format!(
            "{} hard links (agent.allow_hardlinks is off)",
            meta.nlink()
        )));
    }
    Ok(file)
}

struct Collect<'m> {
    matcher: &'m RegexMatcher,
    hits: FileHits,
    keep: usize,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.hits.count += 1;
        if self.hits.lines.len() < self.keep {
            let line = m.line_number().unwrap_or(0);
            self.hits
                .lines
                .push((line, render_line(self.matcher, m.bytes())));
        }
        Ok(self.hits.count < COUNT_LIMIT)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, std::io::Error> {
        // Matches already collected from a file found binary later go too.
        self.hits.binary = true;
        self.hits.lines.clear();
        self.hits.count = 0;
        Ok(false)
    }
}

/// A matched line as shown: end trimmed, lossy UTF-8, and when long, a
/// window of [`MAX_LINE_CHARS`] characters around the first match.
fn render_line(matcher: &RegexMatcher, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    if text.chars().count() <= MAX_LINE_CHARS {
        return text.to_owned();
    }
    let at = matcher
        .find(text.as_bytes())
        .ok()
        .flatten()
        .map_or(0, |m| m.start());
    // Char index of the match, then a window that starts a little before it.
    let match_char = text.char_indices().take_while(|&(i, _)| i < at).count();
    let total = text.chars().count();
    let start = match_char
        .saturating_sub(MAX_LINE_CHARS / 4)
        .min(total - MAX_LINE_CHARS);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(text.chars().skip(start).take(MAX_LINE_CHARS));
    if start + MAX_LINE_CHARS < total {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hard link's other name may be outside the workspace: skipped and,
    /// named directly, refused — unless `agent.allow_hardlinks`.
    #[test]
    fn hard_linked_files_are_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(outside.path().join("vault.txt"), "needle in the vault\n").unwrap();
        std::fs::hard_link(outside.path().join("vault.txt"), root.join("notes.md")).unwrap();
        std::fs::write(root.join("plain.md"), "a needle here\n").unwrap();
        let none = |_: &Path| None;
        let found = search_with_options(
            root,
            &SearchArgs::literal("needle"),
            &none,
            SearchOptions::default(),
        )
        .unwrap();
        let paths: Vec<&str> = found.matches.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, ["plain.md"]);
        let named = SearchArgs {
            path: Some(root.join("notes.md")),
            ..SearchArgs::literal("needle")
        };
        let err = search_with_options(root, &named, &none, SearchOptions::default()).unwrap_err();
        assert!(err.to_string().contains("agent.allow_hardlinks"), "{err}");
        let allowed = SearchOptions {
            allow_hardlinks: true,
        };
        let found = search_with_options(root, &named, &none, allowed).unwrap();
        assert_eq!(found.matches.len(), 1);
    }

    /// A FIFO among the files is not read (the search would block on it).
    #[test]
    fn a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let fifo = std::ffi::CString::new(root.join("pipe.txt").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path we own, with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(root.join("a.txt"), "needle\n").unwrap();
        let file = open_checked(&root.join("pipe.txt"), SearchOptions::default());
        assert!(file.is_err());
        let found = search(root, &SearchArgs::literal("needle")).unwrap();
        assert_eq!(found.matches.len(), 1);
    }
}
