//! The snippet sources, run in rank order under the deadline.
use std::collections::{HashMap, HashSet};
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::imports::{import_names, module_names, outline};
use super::similar::{self, best_windows, identifiers, is_common_word, vocabulary};
use super::windows::{line_count, line_of, slice_lines};
use super::{relative_label, ContextInput, OpenFile, DIAGNOSTIC_LINE_RADIUS, MAX_DISK_READS};
use super::{MAX_SNIPPET_LINES, NEAR_LINES};
use crate::index::{FileInfo, IndexedSymbol};
use crate::model::Snippet;
use crate::syntax::{Language, SymbolKind};

/// Longest definition snippet, in lines.
const MAX_DEFINITION_LINES: usize = 30;
/// Definition snippets in all, and per name.
const MAX_DEFINITIONS: usize = 6;
const MAX_DEFINITIONS_PER_NAME: usize = 2;
/// A name with more definitions than this is too common to guess which one
/// the user means (`new`, `run`).
const MAX_AMBIGUITY: usize = 4;
/// Names looked up, near the cursor and in the signature together.
const MAX_NAMES: usize = 16;
/// Shortest name worth a lookup.
const MIN_NAME_LEN: usize = 3;
/// Recently edited ranges: lines shown around each, ranges per file, in all.
const EDIT_CONTEXT_LINES: usize = 3;
const EDITS_PER_FILE: usize = 2;
const MAX_EDITS: usize = 4;
/// Similar windows kept.
const MAX_SIMILAR: usize = 3;
/// Imported files outlined.
const MAX_IMPORTS: usize = 3;
/// Diagnostics shown, and the longest message.
const MAX_DIAGNOSTICS: usize = 5;
const MAX_MESSAGE_CHARS: usize = 160;
/// Files larger than this are not read from disk for a definition.
const MAX_DISK_FILE_BYTES: u64 = 1 << 20;

/// What the sources found: the errors snippet apart, the rest best first.
#[derive(Default)]
pub(super) struct Gathered {
    pub errors: Option<Snippet>,
    pub ranked: Vec<(&'static str, Snippet)>,
}

/// The text of a file: a buffer the caller holds, or one read from disk.
#[derive(Clone)]
enum Text<'a> {
    Borrowed(&'a str),
    Shared(Arc<str>),
}

impl Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Shared(s) => s,
        }
    }
}

/// A region already offered: lines of a file, or (`None`) its outline.
struct Taken {
    path: PathBuf,
    lines: Option<Range<usize>>,
}

pub(super) struct Gatherer<'i, 'a> {
    input: &'i ContextInput<'a>,
    cursor: usize,
    cursor_line: usize,
    taken: Vec<Taken>,
    out: Gathered,
    disk: HashMap<PathBuf, Option<Arc<str>>>,
}

type Source<'i, 'a> = fn(&mut Gatherer<'i, 'a>) -> bool;

impl<'i, 'a> Gatherer<'i, 'a> {
    /// `cursor_line` is the cursor's 0-based line, `shown` the lines of the
    /// current document the windows may show.
    pub fn new(
        input: &'i ContextInput<'a>,
        cursor: usize,
        cursor_line: usize,
        shown: Range<usize>,
    ) -> Self {
        let mut taken = Vec::new();
        if let Some(path) = input.path {
            taken.push(Taken {
                path: path.to_path_buf(),
                lines: Some(shown),
            });
        }
        Gatherer {
            input,
            cursor,
            cursor_line,
            taken,
            out: Gathered::default(),
            disk: HashMap::new(),
        }
    }

    /// Runs the sources in rank order; true when the deadline cut it short.
    pub fn run(&mut self) -> bool {
        let sources: [Source<'i, 'a>; 5] = [
            Self::diagnostics,
            Self::definitions,
            Self::recent_edits,
            Self::similar_code,
            Self::imports,
        ];
        for source in sources {
            if self.late() || !source(self) {
                return true;
            }
        }
        false
    }

    pub fn finish(self) -> Gathered {
        self.out
    }

    fn late(&self) -> bool {
        Instant::now() >= self.input.deadline
    }

    fn label(&self, path: &Path) -> String {
        relative_label(path, self.input.root)
    }

    fn is_current(&self, path: &Path) -> bool {
        self.input.path == Some(path)
    }

    /// Claims `lines` of `path` unless an offered region overlaps them.
    fn claim(&mut self, path: &Path, lines: Option<Range<usize>>) -> bool {
        let overlaps = |a: &Option<Range<usize>>, b: &Option<Range<usize>>| match (a, b) {
            (Some(a), Some(b)) => a.start < b.end && b.start < a.end,
            (None, None) => true,
            _ => false,
        };
        if self
            .taken
            .iter()
            .any(|t| t.path == path && overlaps(&t.lines, &lines))
        {
            return false;
        }
        self.taken.push(Taken {
            path: path.to_path_buf(),
            lines,
        });
        true
    }

    fn push(&mut self, kind: &'static str, path: &Path, text: &str) {
        let mut text = text.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let label = self.label(path);
        self.out.ranked.push((kind, Snippet { path: label, text }));
    }

    /// The text of `path`: the current document, an open buffer, or the
    /// file on disk (at most [`MAX_DISK_READS`] of those per call).
    fn file_text(&mut self, path: &Path) -> Option<Text<'a>> {
        let input: &ContextInput<'a> = self.input;
        if input.path == Some(path) {
            return Some(Text::Borrowed(input.text));
        }
        if let Some(open) = input.open_files.iter().find(|f| f.path == path) {
            return Some(Text::Borrowed(open.text));
        }
        if let Some(cached) = self.disk.get(path) {
            return cached.clone().map(Text::Shared);
        }
        if self.disk.len() >= MAX_DISK_READS {
            return None;
        }
        // Regular files only (a FIFO must not block a completion), capped.
        let read = crate::fsread::read_regular_to_string(path, MAX_DISK_FILE_BYTES)
            .ok()
            .map(Arc::<str>::from);
        self.disk.insert(path.to_path_buf(), read.clone());
        read.map(Text::Shared)
    }

    /// Errors near the cursor line, as comments in the file's syntax.
    fn diagnostics(&mut self) -> bool {
        let mut lines: Vec<String> = Vec::new();
        let comment = self.line_comment();
        for (line, message) in self.input.diagnostics {
            if line.abs_diff(self.cursor_line) > DIAGNOSTIC_LINE_RADIUS {
                continue;
            }
            let message = message.lines().next().unwrap_or("").trim();
            let message: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
            let entry = format!("{comment} line {}: {message}\n", line + 1);
            if !lines.contains(&entry) {
                lines.push(entry);
            }
            if lines.len() == MAX_DIAGNOSTICS {
                break;
            }
        }
        if !lines.is_empty() {
            let current = self
                .input
                .path
                .map(|p| self.label(p))
                .unwrap_or_else(|| "current file".to_string());
            self.out.errors = Some(Snippet {
                path: format!("{current} (errors)"),
                text: lines.concat(),
            });
        }
        true
    }

    fn line_comment(&self) -> &'static str {
        let language = self
            .input
            .language
            .or_else(|| self.input.path.and_then(Language::from_path));
        Language::line_comment(language)
    }

    /// Definitions of the names near the cursor and in the enclosing
    /// function's signature.
    fn definitions(&mut self) -> bool {
        let Some(index) = self.input.index else {
            return true;
        };
        let names = self.names_to_look_up();
        let mut found = 0;
        for name in names {
            if self.late() {
                return false;
            }
            let defs: Vec<IndexedSymbol> = index
                .definitions(&name)
                .into_iter()
                .filter(|d| {
                    !matches!(
                        d.kind,
                        SymbolKind::Impl
                            | SymbolKind::Field
                            | SymbolKind::EnumMember
                            | SymbolKind::Property
                    )
                })
                .collect();
            if defs.len() > MAX_AMBIGUITY {
                continue;
            }
            let mut per_name = 0;
            for def in defs {
                let start = def.range.0.line as usize;
                let end = (def.range.1.line as usize + 1).min(start + MAX_DEFINITION_LINES);
                if !self.claim(&def.path, Some(start..end)) {
                    continue;
                }
                let Some(text) = self.file_text(&def.path) else {
                    continue;
                };
                let body = slice_lines(&text, start..end);
                if body.trim().is_empty() {
                    continue;
                }
                self.push("definition", &def.path, body);
                per_name += 1;
                found += 1;
                if per_name == MAX_DEFINITIONS_PER_NAME || found == MAX_DEFINITIONS {
                    break;
                }
            }
            if found == MAX_DEFINITIONS {
                break;
            }
        }
        true
    }

    /// Identifiers from the cursor line and the lines above it, nearest
    /// first, then the names in the enclosing function's signature.
    fn names_to_look_up(&self) -> Vec<String> {
        let text = self.input.text;
        let first = self.cursor_line.saturating_sub(NEAR_LINES);
        let region_start = text[..self.cursor]
            .rmatch_indices('\n')
            .nth(self.cursor_line - first)
            .map_or(0, |(i, _)| i + 1);
        let region_end = text[self.cursor..]
            .find('\n')
            .map_or(text.len(), |i| self.cursor + i);
        let region = &text[region_start..region_end];
        let mut seen = HashSet::new();
        let mut names: Vec<String> = Vec::new();
        let mut add = |name: &str, names: &mut Vec<String>| {
            if name.len() >= MIN_NAME_LEN && !is_common_word(name) && seen.insert(name.to_string())
            {
                names.push(name.to_string());
            }
        };
        // Nearest the cursor first: the cursor line left of the cursor
        // (backwards), its right part, then the lines above, backwards.
        let cursor_in_region = self.cursor - region_start;
        let line_start = region[..cursor_in_region].rfind('\n').map_or(0, |i| i + 1);
        // Fields (`x.value`, no call) are skipped: field definitions are
        // not offered, and common field names can have thousands of them.
        let all: Vec<(usize, &str)> = identifiers(region)
            .filter(|&(at, name)| !is_field_access(region, at, name.len()))
            .collect();
        for (at, name) in all.iter().rev() {
            if *at >= line_start && *at < cursor_in_region {
                add(name, &mut names);
            }
        }
        for (at, name) in &all {
            if *at >= cursor_in_region {
                add(name, &mut names);
            }
        }
        for (at, name) in all.iter().rev() {
            if *at < line_start {
                add(name, &mut names);
            }
        }
        if let Some(signature) = self.enclosing_signature() {
            for (_, name) in identifiers(&signature.1) {
                if name != signature.0 {
                    add(name, &mut names);
                }
            }
        }
        names.truncate(MAX_NAMES);
        names
    }

    /// The innermost function around the cursor, per the index: its name
    /// and its one-line signature.
    fn enclosing_signature(&self) -> Option<(String, String)> {
        let index = self.input.index?;
        let path = self.input.path?;
        let line = self.cursor_line as u32;
        index
            .enclosing_symbol(path, line, |kind| {
                matches!(
                    kind,
                    SymbolKind::Function | SymbolKind::Method | SymbolKind::Constructor
                )
            })
            .and_then(|s| Some((s.name.to_string(), s.detail?.to_string())))
    }

    /// Ranges recently edited in the other open files, most recent first.
    fn recent_edits(&mut self) -> bool {
        let mut files: Vec<&'a OpenFile<'a>> = self
            .input
            .open_files
            .iter()
            .filter(|f| !self.is_current(f.path))
            .collect();
        files.sort_by_key(|f| f.recency);
        let mut found = 0;
        for file in files {
            if self.late() {
                return false;
            }
            let total_lines = line_count(file.text);
            for edit in file.recent_edits.iter().take(EDITS_PER_FILE) {
                let first = line_of(file.text, edit.start).saturating_sub(EDIT_CONTEXT_LINES);
                let last = line_of(file.text, edit.end.max(edit.start)) + EDIT_CONTEXT_LINES;
                let end = (last + 1).min(first + MAX_SNIPPET_LINES).min(total_lines);
                if first >= end || !self.claim(file.path, Some(first..end)) {
                    continue;
                }
                let body = slice_lines(file.text, first..end);
                if body.trim().is_empty() {
                    continue;
                }
                self.push("recent_edit", file.path, body);
                found += 1;
                if found == MAX_EDITS {
                    return true;
                }
            }
        }
        true
    }

    /// Windows of the open files most like the code before the cursor.
    fn similar_code(&mut self) -> bool {
        let mut files: Vec<&'a OpenFile<'a>> = self
            .input
            .open_files
            .iter()
            .filter(|f| !self.is_current(f.path))
            .collect();
        if files.is_empty() {
            // Nothing to compare with: the query's vocabulary is not needed.
            return true;
        }
        files.sort_by_key(|f| f.recency);
        let text = self.input.text;
        let start = text[..self.cursor]
            .rmatch_indices('\n')
            .nth(similar::WINDOW_LINES - 1)
            .map_or(0, |(i, _)| i + 1);
        let query = vocabulary(&text[start..self.cursor]);
        let mut scored: Vec<(f64, usize, &'a OpenFile<'a>, Range<usize>)> = Vec::new();
        for (rank, file) in files.into_iter().enumerate() {
            if self.late() {
                return false;
            }
            for (score, lines) in best_windows(&query, file.text, MAX_SIMILAR) {
                scored.push((score, rank, file, lines));
            }
        }
        // Best first; ties to the more recently touched file.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut found = 0;
        for (_, _, file, lines) in scored {
            if !self.claim(file.path, Some(lines.clone())) {
                continue;
            }
            self.push("similar", file.path, slice_lines(file.text, lines));
            found += 1;
            if found == MAX_SIMILAR {
                break;
            }
        }
        true
    }

    /// Outlines of the files the current document imports.
    fn imports(&mut self) -> bool {
        let Some(index) = self.input.index else {
            return true;
        };
        let names = import_names(self.input.text);
        if names.is_empty() {
            return true;
        }
        let files = index.files();
        let mut by_module: HashMap<&str, Vec<&FileInfo>> = HashMap::new();
        for file in &files {
            for name in module_names(&file.path, file.language) {
                by_module.entry(name).or_default().push(file);
            }
        }
        let here = self.input.path.and_then(Path::parent);
        let mut found = 0;
        for name in names {
            if self.late() {
                return false;
            }
            let Some(candidates) = by_module.get(name.as_str()) else {
                continue;
            };
            // Of several files by that name, the one nearest the current file.
            let Some(best) = candidates
                .iter()
                .filter(|f| !self.is_current(&f.path))
                .max_by_key(|f| {
                    let shared = here.map_or(0, |h| {
                        h.components()
                            .zip(f.path.components())
                            .take_while(|(a, b)| a == b)
                            .count()
                    });
                    (shared, std::cmp::Reverse(f.path.clone()))
                })
            else {
                continue;
            };
            let path = best.path.clone();
            if !self.claim(&path, None) {
                continue;
            }
            let outline = outline(&index.file_symbols(&path));
            if outline.is_empty() {
                continue;
            }
            self.push("import", &path, &outline);
            found += 1;
            if found == MAX_IMPORTS {
                break;
            }
        }
        true
    }
}

/// Whether the identifier at `at..at + len` of `text` is a member access
/// that is not a call: `a.b` but not `a.b(`.
fn is_field_access(text: &str, at: usize, len: usize) -> bool {
    let after_dot = at > 0 && text.as_bytes()[at - 1] == b'.';
    let called = text[at + len..].trim_start().starts_with('(');
    after_dot && !called
}
