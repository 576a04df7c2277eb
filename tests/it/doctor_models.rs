//! `fettle doctor` checks each configured model with a real round trip:
//! a remote one against the mock model server on 127.0.0.1, one whose
//! server is down, and an embedded one whose weights are missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use fettle::mock::{MockServer, Script, ScriptedResponse};

fn doctor(cwd: &Path) -> Output {
    doctor_with(cwd, &[])
}

fn doctor_with(cwd: &Path, flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fettle"))
        .arg("doctor")
        .args(flags)
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", cwd.join(".config"))
        .env("FETTLE_DOCTOR_TEST_KEY", "sk-test-not-a-real-key")
        .env_remove("FETTLE_LOG")
        .output()
        .expect("run fettle doctor")
}

/// The user's own file: a keyed model's `base_url` from the workspace's
/// `fettle.toml` would be ignored until trusted (tests/trust_cli.rs).
fn write_user_config(cwd: &Path, text: String) {
    let file = cwd.join(".config/fettle/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

/// A port on which nothing listens.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn config(server: &str, down_port: u16, workspace: &Path, completion_model: &str) -> String {
    format!(
        r#"
[models.fast]
provider = "openai"
base_url = "{server}/v1"
model = "tiny-coder"
api_key_env = "FETTLE_DOCTOR_TEST_KEY"

[models.down]
provider = "openai"
base_url = "http://127.0.0.1:{down_port}/v1"
model = "m"
timeout_ms = 2000

[models.local]
path = "{}"

[completion]
model = "{completion_model}"
[edit]
model = "fast"
[agent]
model = "fast"
"#,
        workspace.join("absent.gguf").display()
    )
}

/// `fettle doctor` with the models of [`config`], the remote one on a mock
/// that always answers "OK", and `completion_model` for completion: the
/// mock, what the doctor did, and its stdout.
async fn doctor_against_the_mock(completion_model: &str) -> (MockServer, Output, String) {
    doctor_against_a_mock_answering_after(0, completion_model).await
}

/// The same, with the mock answering "OK" after `delay_ms`.
async fn doctor_against_a_mock_answering_after(
    delay_ms: u64,
    completion_model: &str,
) -> (MockServer, Output, String) {
    let server = MockServer::start(Script::new(vec![ScriptedResponse {
        repeat: true,
        delay_ms,
        ..ScriptedResponse::text("OK")
    }]))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_user_config(
        dir.path(),
        config(&server.url(), closed_port(), dir.path(), completion_model),
    );
    let cwd = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || doctor(&cwd))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (server, out, text)
}

fn line_after<'a>(text: &'a str, header: &str) -> &'a str {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(header));
    lines.next();
    lines
        .find(|l| l.contains("ok:") || l.contains("FAILED"))
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_model_gets_a_round_trip_and_a_clear_verdict() {
    let (server, out, text) = doctor_against_the_mock("fast").await;

    assert!(
        text.contains("fast (openai, used by completion, edit, agent)"),
        "{text}"
    );
    assert!(
        text.contains("api key: $FETTLE_DOCTOR_TEST_KEY is set"),
        "{text}"
    );
    let fast = line_after(&text, "fast (openai");
    // Used by completion: its FIM path comes first; then chat (edit, agent).
    assert!(
        fast.contains("ok: FIM (completion) answered \"OK\""),
        "{text}"
    );
    assert!(text.contains("ok: chat answered \"OK\""), "{text}");
    assert!(!text.contains("slow for ghost text"), "{text}");
    assert!(fast.contains("ms"), "{fast}");

    let down = line_after(&text, "down (openai");
    assert!(
        down.contains("FAILED") && down.contains("cannot connect"),
        "{text}"
    );

    let local = line_after(&text, "local (local");
    assert!(
        local.contains("FAILED") && local.contains("fettle model fetch"),
        "{text}"
    );

    // The broken models are used by no feature, so the verdict is success.
    assert!(out.status.success(), "{text}");
    // The key was sent, and never printed.
    let sent = server.requests();
    // The FIM request completion would send (a model name without a known
    // FIM template: the chat layout with a hole), then the chat probe.
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[0].body.to_string().contains("{{FILL_HERE}}"),
        "{sent:?}"
    );
    assert!(
        sent[1]
            .body
            .to_string()
            .contains("Reply with the single word OK."),
        "{sent:?}"
    );
    for request in &sent {
        assert_eq!(
            request.headers["authorization"],
            "Bearer sk-test-not-a-real-key"
        );
    }
    assert!(!text.contains("sk-test-not-a-real-key"));
}

/// `--only-used` (what `:checkhealth fettle` runs): the models no feature
/// uses are listed, not probed — no connection to the server that is
/// down, no loading of the embedded model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_used_probes_only_the_models_a_feature_uses() {
    let server = MockServer::start(Script::new(vec![ScriptedResponse {
        repeat: true,
        ..ScriptedResponse::text("OK")
    }]))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_user_config(
        dir.path(),
        config(&server.url(), closed_port(), dir.path(), "fast"),
    );
    let cwd = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || doctor_with(&cwd, &["--only-used"]))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("ok: chat answered \"OK\""), "{text}");
    let after = |header: &str| {
        text.lines()
            .skip_while(|l| !l.trim_start().starts_with(header))
            .nth(1)
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(
        after("down (openai").trim(),
        "not probed: no feature uses it",
        "{text}"
    );
    assert_eq!(
        after("local (local").trim(),
        "not probed: no feature uses it",
        "{text}"
    );
    assert!(!text.contains("FAILED"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_model_that_a_feature_uses_fails_the_doctor() {
    let (_server, out, text) = doctor_against_the_mock("down").await;
    assert!(text.contains("down (openai, used by completion)"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// `fettle doctor` in `cwd` with `home` as `$HOME` and only a local model
/// configured: the verdict line of that model.
fn local_verdict(cwd: &Path, home: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fettle"))
        .arg("doctor")
        .current_dir(cwd)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("FETTLE_LOG")
        .output()
        .expect("run fettle doctor");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    line_after(&text, "local (local").to_owned()
}

#[test]
fn missing_default_weights_advise_the_fetch_command() {
    let dir = tempfile::tempdir().unwrap();
    let local = local_verdict(dir.path(), dir.path());
    assert!(local.contains("FAILED"), "{local}");
    assert!(
        local.contains("Run `fettle model fetch` to install the default model"),
        "{local}"
    );
}

#[test]
fn a_missing_custom_file_is_not_answered_with_the_default_model() {
    // `fettle model fetch` without `--url` would save SmolLM2 under this
    // custom name: the advice must say to fix the path or fetch that file.
    let dir = tempfile::tempdir().unwrap();
    let custom = dir.path().join("models/qwen-coder.gguf");
    std::fs::write(
        dir.path().join("fettle.toml"),
        format!("[models.local]\npath = \"{}\"\n", custom.display()),
    )
    .unwrap();
    let local = local_verdict(dir.path(), dir.path());
    assert!(local.contains("FAILED"), "{local}");
    assert!(local.contains(&custom.display().to_string()), "{local}");
    assert!(local.contains("Check models.local.path"), "{local}");
    assert!(
        local.contains("`fettle model fetch --model local --url <URL of the .gguf>`"),
        "{local}"
    );
    assert!(
        !local.contains("Run `fettle model fetch` to install the default model"),
        "{local}"
    );
}

/// A completion model whose first output takes over a second is called
/// too slow for ghost text (its chat is not judged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_completion_model_is_called_too_slow_for_ghost_text() {
    let (_server, _out, text) = doctor_against_a_mock_answering_after(1300, "fast").await;
    assert!(
        text.contains("slow for ghost text: the first output took"),
        "{text}"
    );
    assert_eq!(text.matches("slow for ghost text").count(), 1, "{text}");
}
