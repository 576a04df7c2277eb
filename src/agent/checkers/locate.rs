//! Printed places → workspace files and columns. Paths are relative to
//! the root (where the checker ran) or absolute; places outside the root
//! (a dependency's source, the standard library) are dropped. Columns are
//! converted from the tool's unit with the file's text on disk, which is
//! what the tool read.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use super::parse::{RawDiagnostic, RawLocation, RawPoint, Unit};
use super::{CheckDiagnostic, Related, Span};
use crate::position::TextPoint;

/// Largest file a checker's diagnostic is located in: regular files only,
/// read whole to turn line/column into positions.
const MAX_LOCATED_FILE_BYTES: u64 = 16 << 20;

pub struct Located {
    pub diagnostics: Vec<CheckDiagnostic>,
    /// Diagnostics with no place inside the root.
    pub outside: usize,
}

/// The texts of the files diagnostics point into, read once each.
struct Files<'a> {
    root: &'a Path,
    texts: HashMap<PathBuf, Option<String>>,
}

impl Files<'_> {
    /// The file `printed` names, if inside the root and readable.
    fn resolve(&mut self, printed: &str) -> Option<PathBuf> {
        let path = Path::new(printed);
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        let normal = normalize(&joined);
        let inside = if normal.starts_with(self.root) {
            normal
        } else {
            // A symlinked spelling of the root (`/tmp` → `/private/tmp`).
            let real = normal.canonicalize().ok()?;
            if !real.starts_with(self.root) {
                return None;
            }
            real
        };
        let text = self.texts.entry(inside.clone()).or_insert_with(|| {
            crate::fsread::read_regular_to_string(&inside, MAX_LOCATED_FILE_BYTES).ok()
        });
        text.is_some().then_some(inside)
    }

    fn text(&self, path: &Path) -> &str {
        self.texts
            .get(path)
            .and_then(|t| t.as_deref())
            .unwrap_or("")
    }
}

/// `a/./b/../c` → `a/c`, without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

pub fn locate(raw: Vec<RawDiagnostic>, unit: Unit, root: &Path, source: &str) -> Located {
    let mut files = Files {
        root,
        texts: HashMap::new(),
    };
    let mut located = Located {
        diagnostics: Vec::new(),
        outside: 0,
    };
    // `cargo check --all-targets` checks a file once per target (the
    // library, its tests): the same finding twice.
    let mut seen = std::collections::HashSet::new();
    for diagnostic in raw {
        let place = diagnostic
            .locations
            .iter()
            .find_map(|loc| files.resolve(&loc.path).map(|path| (path, loc)));
        let Some((path, location)) = place else {
            located.outside += 1;
            continue;
        };
        let span = span_in(files.text(&path), location, unit);
        if !seen.insert((
            path.clone(),
            span,
            diagnostic.code.clone(),
            diagnostic.message.clone(),
        )) {
            continue;
        }
        let mut related = Vec::new();
        for r in &diagnostic.related {
            if let Some(rpath) = files.resolve(&r.location.path) {
                let rspan = span_in(files.text(&rpath), &r.location, unit);
                related.push(Related {
                    path: rpath,
                    span: rspan,
                    message: r.message.clone(),
                });
            }
        }
        located.diagnostics.push(CheckDiagnostic {
            path,
            span,
            severity: diagnostic.severity,
            source: source.to_owned(),
            code: diagnostic.code,
            message: diagnostic.message,
            related,
        });
    }
    located
}

/// The line's text (without its terminator) and its 0-based number,
/// clamped to the file.
fn line_of(text: &str, line1: u32) -> (u32, &str) {
    let wanted = line1.saturating_sub(1) as usize;
    let mut last = (0, "");
    for (n, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        last = (n as u32, line);
        if n == wanted {
            return last;
        }
    }
    last
}

fn point(line: u32, text: &str, byte: usize) -> TextPoint {
    let before = &text[..byte];
    TextPoint {
        line,
        utf8: before.len() as u32,
        utf16: before.encode_utf16().count() as u32,
        utf32: before.chars().count() as u32,
    }
}

/// The byte offset in `line` of 1-based `column` counted in `unit`;
/// `None`: the first non-blank character.
fn byte_at(line: &str, column: Option<u32>, unit: Unit) -> usize {
    let indent = line.len() - line.trim_start().len();
    let Some(column) = column else {
        return indent;
    };
    let target = column.saturating_sub(1) as usize;
    let (start, from) = match unit {
        Unit::CharsAfterIndent => (indent, &line[indent..]),
        _ => (0, line),
    };
    let mut counted = 0;
    for (at, c) in from.char_indices() {
        if counted >= target {
            return start + at;
        }
        counted += match unit {
            Unit::Bytes => c.len_utf8(),
            Unit::Utf16 => c.len_utf16(),
            Unit::Chars | Unit::CharsAfterIndent => 1,
        };
    }
    line.len()
}

/// Where a place without an end ends: the word at `start`, else one
/// character (nothing at the end of a line).
fn word_end(line: &str, start: usize) -> usize {
    let rest = &line[start..];
    let word: usize = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .map(char::len_utf8)
        .sum();
    if word > 0 {
        start + word
    } else {
        start + rest.chars().next().map_or(0, char::len_utf8)
    }
}

fn span_in(text: &str, location: &RawLocation, unit: Unit) -> Span {
    let (line, line_text) = line_of(text, location.start.line);
    let start_byte = byte_at(line_text, location.start.column, unit);
    let start = point(line, line_text, start_byte);
    let end = match location.end {
        Some(RawPoint {
            line: end_line,
            column,
        }) if (end_line, column) > (location.start.line, location.start.column) => {
            let (line, end_text) = line_of(text, end_line);
            let byte = byte_at(end_text, column, unit);
            point(line, end_text, byte)
        }
        _ => point(line, line_text, word_end(line_text, start_byte)),
    };
    Span {
        start,
        end: end.max(start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_in_each_unit_land_on_the_same_character() {
        // `x` after an accented letter and an emoji: byte 9, UTF-16 7, char 6.
        let line = "a é 😀 x";
        for (unit, column) in [(Unit::Bytes, 11), (Unit::Utf16, 8), (Unit::Chars, 7)] {
            let at = byte_at(line, Some(column), unit);
            assert_eq!(&line[at..], "x", "{unit:?}");
        }
        assert_eq!(
            &"    y = é + x"[byte_at("    y = é + x", Some(9), Unit::CharsAfterIndent)..],
            "x"
        );
        assert_eq!(byte_at("  z", None, Unit::Chars), 2);
        assert_eq!(byte_at("ab", Some(40), Unit::Chars), 2, "clamped");
    }

    #[test]
    fn a_place_without_an_end_covers_its_word() {
        let text = "let total = pricee + 1;\n";
        let location = RawLocation {
            path: "a.rs".into(),
            start: RawPoint::new(1, 13),
            end: None,
        };
        let span = span_in(text, &location, Unit::Chars);
        assert_eq!((span.start.utf8, span.end.utf8), (12, 18));
    }
}
