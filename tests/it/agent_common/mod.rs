//! Shared by the agent's end-to-end tests: workspaces copied from fixtures,
//! the mock model on its own runtime, the real `fettle fix` binary, and
//! byte-and-mode-exact tree comparison.
#![allow(clippy::unwrap_used, clippy::expect_used)] // in tests a panic is the failure report

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use fettle::mock::{MockServer, Script};

/// Directories and files a run leaves behind that are not part of the tree.
pub const IGNORED: [&str; 7] = [
    "target",
    "__pycache__",
    ".pytest_cache",
    "node_modules",
    "fettle.toml",
    "Cargo.lock",
    ".fettle-test",
];

/// The mock model server on its own runtime, for the test's life.
pub struct Mock {
    pub server: MockServer,
    _runtime: tokio::runtime::Runtime,
}

impl Mock {
    pub fn start(script: Script) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(MockServer::start(script)).unwrap();
        Self {
            server,
            _runtime: runtime,
        }
    }

    /// A `fettle.toml` making this server the agent's model, plus `extra` TOML
    /// lines for `[agent]`.
    pub fn config(&self, agent_extra: &str) -> String {
        format!(
            "[models.mock]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-coder\"\nmax_retries = 0\n\n[agent]\nmodel = \"mock\"\n{agent_extra}\n",
            self.server.url()
        )
    }

    /// The raw bodies of the chat requests, in order.
    pub fn bodies(&self) -> Vec<String> {
        self.server
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect()
    }
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every directory under `root` (minus `IGNORED` and `extra_ignored`), as
/// relative paths: an empty one left behind shows here, not in [`snapshot`].
pub fn dirs(root: &Path, extra_ignored: &[String]) -> std::collections::BTreeSet<String> {
    fn walk(
        dir: &Path,
        root: &Path,
        ignored: &[String],
        out: &mut std::collections::BTreeSet<String>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if IGNORED.contains(&name.as_str()) || ignored.contains(&name) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                let path = entry.path();
                out.insert(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
                walk(&path, root, ignored, out);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(root, root, extra_ignored, &mut out);
    out
}

/// Every file under `root` (minus `IGNORED` and `extra_ignored`): relative
/// path → (bytes, permission bits).
pub fn snapshot(root: &Path, extra_ignored: &[String]) -> BTreeMap<String, (Vec<u8>, u32)> {
    fn walk(
        dir: &Path,
        root: &Path,
        ignored: &[String],
        out: &mut BTreeMap<String, (Vec<u8>, u32)>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if IGNORED.contains(&name.as_str()) || ignored.contains(&name) {
                continue;
            }
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(&path, root, ignored, out);
            } else if meta.is_file() {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(
                    rel,
                    (
                        std::fs::read(&path).unwrap(),
                        meta.permissions().mode() & 0o7777,
                    ),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, extra_ignored, &mut out);
    out
}

/// [`snapshot`] without the modes.
pub fn files(root: &Path, extra_ignored: &[String]) -> BTreeMap<String, Vec<u8>> {
    snapshot(root, extra_ignored)
        .into_iter()
        .map(|(path, (bytes, _))| (path, bytes))
        .collect()
}

/// Where `actual` differs from `wanted`: one entry per file, with a short
/// unified diff for content (carriage returns shown as `␍`).
pub fn differences(
    actual: &BTreeMap<String, Vec<u8>>,
    wanted: &BTreeMap<String, Vec<u8>>,
) -> Vec<String> {
    let shown = |b: &[u8]| String::from_utf8_lossy(b).replace('\r', "␍");
    let names: std::collections::BTreeSet<&String> = actual.keys().chain(wanted.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        match (actual.get(name), wanted.get(name)) {
            (Some(a), Some(w)) if a == w => {}
            (Some(a), Some(w)) => {
                let (a, w) = (shown(a), shown(w));
                let diff = similar::TextDiff::from_lines(&w, &a)
                    .unified_diff()
                    .context_radius(2)
                    .header("wanted", "actual")
                    .to_string();
                out.push(format!("{name} differs:\n{}", clip(&diff, 3000)));
            }
            (Some(_), None) => out.push(format!("{name} should not exist")),
            (None, Some(_)) => out.push(format!("{name} is missing")),
            (None, None) => {}
        }
    }
    out
}

/// A readable difference between two snapshots (content and modes), or
/// `None` when equal.
pub fn tree_diff(
    want: &BTreeMap<String, (Vec<u8>, u32)>,
    got: &BTreeMap<String, (Vec<u8>, u32)>,
) -> Option<String> {
    let bytes = |t: &BTreeMap<String, (Vec<u8>, u32)>| {
        t.iter()
            .map(|(p, (b, _))| (p.clone(), b.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    let mut out = differences(&bytes(got), &bytes(want));
    for (path, (_, mode)) in want {
        if let Some((_, m)) = got.get(path).filter(|(_, m)| m != mode) {
            out.push(format!("{path}: mode {m:o}, wanted {mode:o}"));
        }
    }
    (!out.is_empty()).then(|| out.join("\n"))
}

/// The last `max` bytes of `text` (on a char boundary).
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Runs `fettle <args>` with checkpoints under `cache` and no user config.
pub fn fettle(args: &[&str], cache: &Path) -> Output {
    fettle_command(args, cache).output().unwrap()
}

pub fn fettle_command(args: &[&str], cache: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fettle"));
    cmd.args(args)
        .env("FETTLE_CACHE_DIR", cache)
        .env("XDG_CONFIG_HOME", cache.join("no-user-config"))
        .env("FETTLE_LOG", "info")
        .stdin(Stdio::null());
    cmd
}

pub fn fixtures(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
}

/// Whether `python3 -m pytest` works here.
pub fn have_pytest() -> bool {
    Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// rot13, written here rather than taken from the redactor it checks.
pub fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a') + 13) % 26 + b'a') as char,
            'A'..='Z' => (((c as u8 - b'A') + 13) % 26 + b'A') as char,
            _ => c,
        })
        .collect()
}
