//! Workspaces, URIs, edits and the background mock model the tests set up.

use super::*;

/// Applies one LSP edit whose positions count UTF-8 bytes.
pub fn apply_utf8_edit(text: &str, range: &Value, new_text: &str) -> String {
    let offset = |pos: &Value| {
        let line = pos["line"].as_u64().unwrap() as usize;
        let character = pos["character"].as_u64().unwrap() as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        (start + character).min(text.len())
    };
    let (start, end) = (offset(&range["start"]), offset(&range["end"]));
    format!("{}{new_text}{}", &text[..start], &text[end..])
}

pub fn file_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for byte in path.to_str().expect("utf-8 path").bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// A temporary workspace with the given files.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Self { dir };
        for (path, text) in files {
            ws.write(path, text);
        }
        ws
    }

    pub fn root(&self) -> PathBuf {
        // Canonical, so URIs match what the server derives from paths.
        self.dir.path().canonicalize().expect("canonicalize")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn uri(&self, rel: &str) -> String {
        file_uri(&self.path(rel))
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Replaces the workspace root in a JSON value with `$ROOT`, for snapshots.
pub fn redact(value: &Value, root: &Path) -> Value {
    let root_uri = file_uri(root);
    let root_path = root.display().to_string();
    match value {
        Value::String(s) => Value::String(
            s.replace(&root_uri, "file://$ROOT")
                .replace(&root_path, "$ROOT"),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, root)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), redact(v, root)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The mock model server on its own runtime, in the background, for the
/// test's life (the harness itself is synchronous).
pub struct BackgroundMock {
    pub server: fettle::mock::MockServer,
    _runtime: tokio::runtime::Runtime,
}

impl BackgroundMock {
    pub fn start(script: fettle::mock::Script) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime
            .block_on(fettle::mock::MockServer::start(script))
            .unwrap();
        Self {
            server,
            _runtime: runtime,
        }
    }
}
