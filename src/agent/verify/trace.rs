//! Stack traces — Python tracebacks, Rust panics and `RUST_BACKTRACE`
//! backtraces, Node.js `Error.stack`, Go panics — read into the frames that
//! are in the workspace, innermost first, each with its function where the
//! trace names one. A trace comes from a test run or is pasted by the user
//! (`fettle fix --trace FILE`); the functions of its frames are the first
//! code a repair should read.

use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;

use super::frames::Resolver;

/// One frame of a trace that lies in the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceFrame {
    /// Relative to the workspace root, `/`-separated.
    pub path: String,
    pub line: u32,
    /// As the trace names it (`parse_config`, `app::config::parse`).
    pub function: Option<String>,
}

/// The most frames kept of one trace.
const MAX_FRAMES: usize = 32;

/// The workspace frames of every trace in `text`, innermost first (each
/// frame once).
pub fn parse_trace(text: &str, root: &Path) -> Vec<TraceFrame> {
    let resolver = Resolver::new(root);
    let mut out: Vec<TraceFrame> = Vec::new();
    for (path, line, function) in raw_frames(text) {
        // A pasted trace was often printed on another machine.
        let found = resolver
            .resolve(None, &path)
            .or_else(|| resolver.resolve_elsewhere(&path));
        let Some(path) = found else {
            continue;
        };
        let frame = TraceFrame {
            path,
            line,
            function: function
                .as_deref()
                .map(clean_function)
                .filter(|f| !f.is_empty()),
        };
        if !out.contains(&frame) && out.len() < MAX_FRAMES {
            out.push(frame);
        }
    }
    out
}

/// The error a trace shows, as a test run that reproduces it prints it
/// too: a Python or JavaScript exception's type (`IndexError`), a Rust
/// panic's message, a Go panic's — each without the values that vary
/// (`index out of bounds`, not `…: the len is 3 but the index is 5`).
/// `None` when the trace shows none.
pub fn trace_error(text: &str) -> Option<String> {
    let p = patterns()?;
    let lines: Vec<&str> = text.lines().collect();
    let mut exception: Option<String> = None;
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim();
        if let Some(rest) = line.split_once("panicked at ").map(|(_, r)| r) {
            // Before Rust 1.73: `panicked at 'msg', src/x.rs:1:2`; since:
            // the message on the next line.
            let message = match rest.strip_prefix('\'') {
                Some(quoted) => quoted.rsplit_once("', ").map_or(quoted, |(m, _)| m),
                None => lines.get(i + 1).map_or("", |l| l.trim()),
            };
            return stable_part(message);
        }
        if let Some(rest) = line.strip_prefix("panic: ") {
            let rest = rest.trim_end_matches(" [recovered]");
            return stable_part(rest.strip_prefix("runtime error: ").unwrap_or(rest));
        }
        if let Some(c) = p.exception.captures(line) {
            // Python's last exception line is the one raised at the end.
            exception = Some(c[1].to_owned());
        }
    }
    exception
}

/// A message up to where its varying values start (`: `, `[`, a digit
/// after a space), bounded; `None` when nothing is left.
fn stable_part(message: &str) -> Option<String> {
    let mut end = message.len();
    for pattern in [": ", " ["] {
        if let Some(at) = message.find(pattern) {
            end = end.min(at);
        }
    }
    let head = message[..end].trim();
    let head: String = head.chars().take(80).collect();
    (head.len() >= 3).then_some(head)
}

/// A frame as printed: path, line, function.
type RawFrame = (String, u32, Option<String>);

/// Every frame of the traces in `text`, innermost first.
fn raw_frames(text: &str) -> Vec<RawFrame> {
    let mut out: Vec<RawFrame> = Vec::new();
    let Some(p) = patterns() else {
        return out;
    };
    let number = |m: &str| m.parse::<u32>().unwrap_or(0);
    let lines: Vec<&str> = text.lines().collect();
    // Python prints the innermost frame last: each traceback is read
    // backwards.
    let mut python: Vec<RawFrame> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(c) = p.python.captures(line) {
            python.push((c[1].to_owned(), number(&c[2]), Some(c[3].to_owned())));
            continue;
        }
        if !python.is_empty() && !line.starts_with(' ') && !line.trim().is_empty() {
            // The traceback ended (its exception line).
            out.extend(python.drain(..).rev());
        }
        let next = lines.get(i).copied().unwrap_or("");
        if let Some(c) = p.rust_panic.captures(line) {
            out.push((c[1].to_owned(), number(&c[2]), None));
        } else if let (Some(c), Some(at)) = (p.rust_frame.captures(line), p.rust_at.captures(next))
        {
            // `  12: app::config::parse` then `        at ./src/config.rs:40:9`.
            out.push((at[1].to_owned(), number(&at[2]), Some(c[1].to_owned())));
            i += 1;
        } else if let Some(c) = p.node_named.captures(line) {
            out.push((c[2].to_owned(), number(&c[3]), Some(c[1].to_owned())));
        } else if let Some(c) = p.node_bare.captures(line) {
            out.push((c[1].to_owned(), number(&c[2]), None));
        } else if let (Some(c), Some(at)) = (p.go_func.captures(line), p.go_at.captures(next)) {
            // `main.parse(...)` then `\t/abs/main.go:12 +0x1d`.
            out.push((at[1].to_owned(), number(&at[2]), Some(c[1].to_owned())));
            i += 1;
        }
    }
    out.extend(python.drain(..).rev());
    out
}

/// `app::config::parse::h1a2b3c` → `app::config::parse`; `Object.<anonymous>`
/// and `async fn` markers dropped.
fn clean_function(name: &str) -> String {
    let name = name.trim().trim_start_matches("async ");
    let name = match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    };
    if name.contains('<') && name.contains("anonymous") {
        return String::new();
    }
    name.to_owned()
}

struct Patterns {
    python: Regex,
    exception: Regex,
    rust_panic: Regex,
    rust_frame: Regex,
    rust_at: Regex,
    node_named: Regex,
    node_bare: Regex,
    go_func: Regex,
    go_at: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static PATTERNS: OnceLock<Option<Patterns>> = OnceLock::new();
    PATTERNS
        .get_or_init(|| {
            Some(Patterns {
                python: Regex::new(r#"^\s*File "([^"]+)", line (\d+), in (\S+)"#).ok()?,
                // `ValueError: x`, `json.decoder.JSONDecodeError: x`,
                // `Uncaught TypeError: x` (Node), `KeyError` alone.
                exception: Regex::new(
                    r"^(?:Uncaught )?(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))(?::|$)",
                )
                .ok()?,
                rust_panic: Regex::new(r"panicked at ([^:\s][^:]*):(\d+):\d+").ok()?,
                rust_frame: Regex::new(r"^\s*\d+: (\S+)$").ok()?,
                rust_at: Regex::new(r"^\s+at (\S+):(\d+):\d+$").ok()?,
                node_named: Regex::new(r"^\s+at (?:async )?(\S+) \((.+?):(\d+):\d+\)$").ok()?,
                node_bare: Regex::new(r"^\s+at (?:async )?([^\s()]+):(\d+):\d+$").ok()?,
                go_func: Regex::new(r"^([\w./-]+\.[\w.()*]+)\(.*\)$").ok()?,
                go_at: Regex::new(r"^\t(\S+\.go):(\d+)").ok()?,
            })
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        dir
    }

    fn frames(text: &str, root: &Path) -> Vec<(String, u32, Option<String>)> {
        parse_trace(text, root)
            .into_iter()
            .map(|f| (f.path, f.line, f.function))
            .collect()
    }

    #[test]
    fn python_traceback_innermost_first_without_the_standard_library() {
        let ws = workspace(&["app/cli.py", "app/config.py"]);
        let root = ws.path();
        let text = format!(
            "Traceback (most recent call last):\n  File \"{0}/app/cli.py\", line 9, in main\n    cfg = load(path)\n  File \"{0}/app/config.py\", line 22, in load\n    return parse(text)\n  File \"/usr/lib/python3.12/json/__init__.py\", line 346, in loads\n    return _default_decoder.decode(s)\n  File \"app/config.py\", line 30, in parse\n    raise ValueError(key)\nValueError: port\n",
            root.display()
        );
        assert_eq!(
            frames(&text, root),
            [
                ("app/config.py".to_owned(), 30, Some("parse".to_owned())),
                ("app/config.py".to_owned(), 22, Some("load".to_owned())),
                ("app/cli.py".to_owned(), 9, Some("main".to_owned())),
            ]
        );
    }

    #[test]
    fn traces_printed_on_another_machine_map_by_their_suffix() {
        let ws = workspace(&[
            "ledger/dates.py",
            "ledger/report.py",
            "main.py",
            "json/x.py",
            "cmd/main.go",
        ]);
        let text = "Traceback (most recent call last):\n  File \"/app/main.py\", line 3, in <module>\n    run()\n  File \"/srv/ledger/ledger/report.py\", line 6, in row\n    return month_name(m)\n  File \"/usr/lib/python3.12/json/x.py\", line 1, in f\n    g()\n  File \"/home/ci/.venv/lib/site-packages/ledger/dates.py\", line 2, in g\n    h()\n  File \"/srv/ledger/ledger/dates.py\", line 14, in month_name\n    return MONTHS[month]\nIndexError: list index out of range\n";
        assert_eq!(
            frames(text, ws.path()),
            [
                (
                    "ledger/dates.py".to_owned(),
                    14,
                    Some("month_name".to_owned())
                ),
                ("ledger/report.py".to_owned(), 6, Some("row".to_owned())),
                ("main.py".to_owned(), 3, Some("<module>".to_owned())),
            ]
        );
        let go = "panic: boom\n\ngoroutine 1 [running]:\nruntime.panic()\n\t/usr/local/go/src/runtime/panic.go:9 +0x1\nmain.main()\n\t/build/ledger/cmd/main.go:20 +0x25\n";
        assert_eq!(
            frames(go, ws.path()),
            [("cmd/main.go".to_owned(), 20, Some("main.main".to_owned()))]
        );
    }

    #[test]
    fn rust_panic_and_backtrace() {
        let ws = workspace(&["src/config.rs", "src/main.rs"]);
        let text = "thread 'main' panicked at src/config.rs:40:9:\nbad port\nstack backtrace:\n   0: rust_begin_unwind\n             at /rustc/abc/library/std/src/panicking.rs:665:5\n   1: app::config::parse::h0123456789abcdef\n             at ./src/config.rs:40:9\n   2: app::main\n             at ./src/main.rs:5:15\n";
        assert_eq!(
            frames(text, ws.path()),
            [
                ("src/config.rs".to_owned(), 40, None),
                (
                    "src/config.rs".to_owned(),
                    40,
                    Some("app::config::parse".to_owned())
                ),
                ("src/main.rs".to_owned(), 5, Some("app::main".to_owned())),
            ]
        );
    }

    #[test]
    fn the_error_of_each_kind_of_trace() {
        let python = "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nKeyError: 'x'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"a.py\", line 3, in f\njson.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n";
        assert_eq!(trace_error(python).as_deref(), Some("JSONDecodeError"));
        assert_eq!(
            trace_error("Traceback:\nIndexError\n").as_deref(),
            Some("IndexError")
        );
        let node = "TypeError: Cannot read properties of undefined (reading 'score')\n    at compare (/x/lib/rank.js:12:20)\n";
        assert_eq!(trace_error(node).as_deref(), Some("TypeError"));
        let rust = "thread 'main' panicked at src/config.rs:40:9:\nindex out of bounds: the len is 3 but the index is 5\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(trace_error(rust).as_deref(), Some("index out of bounds"));
        let old_rust = "thread 'main' panicked at 'called `Option::unwrap()` on a `None` value', src/main.rs:4:37\n";
        assert_eq!(
            trace_error(old_rust).as_deref(),
            Some("called `Option::unwrap()` on a `None` value")
        );
        let go = "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\n";
        assert_eq!(trace_error(go).as_deref(), Some("index out of range"));
        assert_eq!(trace_error("all good\nno error here\n"), None);
    }

    #[test]
    fn node_and_go_traces() {
        let ws = workspace(&["lib/rank.js", "test/rank.test.js", "cmd/main.go"]);
        let root = ws.path();
        let node = format!(
            "TypeError: Cannot read properties of undefined (reading 'score')\n    at compare ({0}/lib/rank.js:12:20)\n    at Array.sort (<anonymous>)\n    at rank ({0}/lib/rank.js:20:15)\n    at {0}/test/rank.test.js:8:5\n    at node:internal/main:1:1\n",
            root.display()
        );
        assert_eq!(
            frames(&node, root),
            [
                ("lib/rank.js".to_owned(), 12, Some("compare".to_owned())),
                ("lib/rank.js".to_owned(), 20, Some("rank".to_owned())),
                ("test/rank.test.js".to_owned(), 8, None),
            ]
        );
        let go = format!(
            "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.parse(...)\n\t{0}/cmd/main.go:12 +0x1d\nmain.main()\n\t{0}/cmd/main.go:20 +0x25\nexit status 2\n",
            root.display()
        );
        assert_eq!(
            frames(&go, root),
            [
                ("cmd/main.go".to_owned(), 12, Some("main.parse".to_owned())),
                ("cmd/main.go".to_owned(), 20, Some("main.main".to_owned())),
            ]
        );
    }
}
