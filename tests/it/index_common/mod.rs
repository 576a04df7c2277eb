//! Fixtures shared by the `index*` integration tests.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

use fettle::index::{IndexSettings, IndexStats, WorkspaceIndex};
use tempfile::TempDir;

pub const LIB_RS: &str = r#"//! Configuration loading.
use std::collections::HashMap;

pub struct Config {
    pub values: HashMap<String, String>,
}

impl Config {
    pub fn load(path: &str) -> Config {
        let values = parse_pairs(path);
        Config { values }
    }

    pub fn get(&self, key: &str) -> Option<&String> {
        self.values.get(key)
    }
}

pub fn parse_pairs(text: &str) -> HashMap<String, String> {
    HashMap::new()
}
"#;

pub const MAIN_RS: &str = r#"mod lib;
use lib::Config;

fn main() {
    let config = Config::load("app.toml");
    let pairs = lib::parse_pairs("a=b");
    println!("{:?} {}", config.get("x"), pairs.len());
}
"#;

pub const UTIL_PY: &str = r#"import os


class PathCache:
    def __init__(self, root):
        self.root = root

    def resolve(self, name):
        return os.path.join(self.root, name)


def load_config(path):
    cache = PathCache(path)
    return cache.resolve("config.toml")
"#;

pub const APP_JS: &str = r#"import { render } from './view.js';

export class Router {
  constructor(routes) {
    this.routes = routes;
  }

  navigate(path) {
    return render(this.routes[path]);
  }
}

export function startApp(routes) {
  pub const router = new Router(routes);
  router.navigate('/');
}
"#;

pub const UTIL_H: &str = r#"#ifndef UTIL_H
#define UTIL_H

struct buffer {
    char *data;
    unsigned long len;
};

int buffer_append(struct buffer *buf, pub const char *text);

#endif
"#;

pub fn write(root: &Path, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = root.join(rel);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(&path, contents).unwrap();
    path
}

pub fn settings() -> IndexSettings {
    IndexSettings {
        max_file_bytes: 4096,
        exclude: vec!["vendor/".into(), "*.min.js".into()],
        threads: 2,
    }
}

/// A workspace with every kind of file the walk must keep or skip.
pub fn workspace() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "target/\n*.gen.rs\n");
    write(root, "src/lib.rs", LIB_RS);
    write(root, "src/main.rs", MAIN_RS);
    write(root, "scripts/util.py", UTIL_PY);
    write(root, "web/app.js", APP_JS);
    write(root, "include/util.h", UTIL_H);
    // Skipped: ignored, hidden, excluded.
    write(
        root,
        "target/debug/build.rs",
        "fn ignored_by_gitignore() {}\n",
    );
    write(root, "src/schema.gen.rs", "fn ignored_generated() {}\n");
    write(root, ".hidden/secret.rs", "fn hidden_fn() {}\n");
    write(root, "vendor/dep/lib.rs", "fn excluded_vendor() {}\n");
    write(
        root,
        "web/bundle.min.js",
        "function excludedMinified() {}\n",
    );
    // Skipped by content: too large, binary, not UTF-8, no grammar.
    write(
        root,
        "src/huge.rs",
        format!("fn too_big() {{}}\n{}", "// padding\n".repeat(500)),
    );
    write(
        root,
        "src/blob.rs",
        b"fn binary_fn() {}\n\0\0\x01\x02".as_slice(),
    );
    write(
        root,
        "src/latin1.rs",
        b"// caf\xe9\nfn not_utf8() {}\n".as_slice(),
    );
    write(root, "README.md", "# Demo\n");
    dir
}

pub fn index(root: &Path) -> (WorkspaceIndex, IndexStats) {
    let index = WorkspaceIndex::new(settings());
    let stats = index.index_roots(&[root.to_path_buf()], &|_| {}, &CancellationToken::new());
    (index, stats)
}

pub fn rel_files(index: &WorkspaceIndex, root: &Path) -> BTreeSet<String> {
    index
        .files()
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

pub fn names(symbols: &[fettle::index::IndexedSymbol]) -> Vec<&str> {
    symbols.iter().map(|s| &*s.name).collect()
}
