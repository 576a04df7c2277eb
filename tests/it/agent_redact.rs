//! Secret redaction: secret file names, every recognised shape (fixture
//! templates filled with generated fake secrets, so no secret-looking text
//! is committed), code that only talks about tokens left alone, and a temp
//! workspace's dotenv values redacted wherever they appear.
// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::fs;
use std::path::{Path, PathBuf};

use fettle::agent::redact::{env_secret_values, is_secret_path, Redactor};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/redact")
}

/// A deterministic run of `len` characters from `alphabet`.
fn fake(alphabet: &str, len: usize, seed: usize) -> String {
    let chars: Vec<char> = alphabet.chars().collect();
    (0..len)
        .map(|i| chars[(i * 7 + seed * 13 + i * i) % chars.len()])
        .collect()
}

const ALNUM: &str = "aB3dE5fG7hJ9kLmN2pQrS4tUvW6xYz8C";
const UPPER: &str = "ABCDEFGHJKLMNPQRSTUVWXYZ234567";
const B64: &str = "AbCdEfGh1234IjKlMnOp5678QrStUvWx90/+";

/// Template name → fake secret.
fn fakes() -> Vec<(&'static str, String)> {
    vec![
        ("openai", format!("sk-proj-{}", fake(ALNUM, 48, 1))),
        ("anthropic", format!("sk-ant-api03-{}", fake(ALNUM, 40, 2))),
        ("github", format!("ghp_{}", fake(ALNUM, 36, 3))),
        ("github_pat", format!("github_pat_{}", fake(ALNUM, 60, 4))),
        ("aws", format!("AKIA{}", fake(UPPER, 16, 5))),
        ("aws_secret", fake(B64, 40, 6)),
        (
            "slack",
            format!("xoxb-{}-{}", fake("0123456789", 12, 7), fake(ALNUM, 24, 7)),
        ),
        ("google", format!("AIza{}", fake(ALNUM, 35, 8))),
        ("stripe", format!("sk_live_{}", fake(ALNUM, 24, 9))),
        ("huggingface", format!("hf_{}", fake(ALNUM, 34, 10))),
        ("bearer", fake(ALNUM, 40, 11)),
        (
            "jwt",
            format!(
                "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
                fake(ALNUM, 30, 12),
                fake(ALNUM, 43, 12)
            ),
        ),
        ("db_password", format!("pw{}", fake(ALNUM, 12, 13))),
        ("quoted_password", format!("Tr0&{}", fake(ALNUM, 8, 14))),
        (
            "unquoted_password",
            format!("hunter{}", fake("0123456789", 8, 15)),
        ),
        ("json_token", fake("0123456789abcdef", 32, 16)),
        ("client_secret", format!("GOCSPX-{}", fake(ALNUM, 28, 17))),
        ("npm", format!("npm_{}", fake(ALNUM, 36, 18))),
        ("key_body", fake(B64, 64, 19)),
    ]
}

fn fill(template: &str) -> (String, Vec<String>) {
    let mut text = template.to_string();
    let mut used = Vec::new();
    for (name, value) in fakes() {
        let slot = format!("{{{{{name}}}}}");
        if text.contains(&slot) {
            text = text.replace(&slot, &value);
            used.push(value);
        }
    }
    assert!(!text.contains("{{"), "unfilled slot in {text}");
    (text, used)
}

/// No 8-character piece of a secret survives (other than one that is in
/// the text around it, like the key `github_pat`).
fn assert_no_leak(out: &str, template: &str, secrets: &[String]) {
    for s in secrets {
        let chars: Vec<char> = s.chars().collect();
        for w in chars.windows(8) {
            let piece: String = w.iter().collect();
            if template.contains(&piece) {
                continue;
            }
            assert!(!out.contains(&piece), "{piece:?} (of {s:?}) leaked:\n{out}");
        }
    }
}

#[test]
fn secret_paths() {
    let secret = [
        ".env",
        ".env.local",
        ".env.production",
        ".ENV",
        ".envrc",
        "deploy/prod.env",
        "certs/server.pem",
        "tls.key",
        "store.p12",
        "store.pfx",
        "release.jks",
        "putty.ppk",
        "/home/u/.ssh/id_rsa",
        "id_rsa.pub",
        "id_ed25519",
        "id_ecdsa",
        "credentials.json",
        "client_secret_1234.apps.googleusercontent.com.json",
        ".netrc",
        ".git-credentials",
        ".pgpass",
        ".pypirc",
        "infra/terraform.tfstate",
        "infra/terraform.tfstate.backup",
    ];
    let not_secret = [
        ".env.example",
        ".env.sample",
        ".env.template",
        ".env.local.example",
        ".env.dist",
        "example.env",
        ".npmrc",
        "environment.rs",
        "src/env.rs",
        "keyboard.rs",
        "key.rs",
        "monkey.py",
        "keys/README.md",
        "pem.rs",
        ".key",
        "credentials.rs",
        "Cargo.toml",
    ];
    for p in secret {
        assert!(is_secret_path(Path::new(p)), "{p} should be secret");
    }
    for p in not_secret {
        assert!(!is_secret_path(Path::new(p)), "{p} should not be secret");
    }
}

#[test]
fn every_shape_is_redacted() {
    let template = fs::read_to_string(fixtures().join("secrets/mixed.txt")).unwrap();
    let (text, secrets) = fill(&template);
    let redactor = Redactor::default();
    let out = redactor.redact(&text);
    assert_no_leak(&out, &template, &secrets);
    assert!(out.contains("let normal_code = compute(42);"));
    insta::assert_snapshot!("mixed", out);
    assert_eq!(redactor.redactions(), out.matches("[REDACTED").count());
}

#[test]
fn private_key_blocks_are_redacted_whole_and_certificates_kept() {
    let template = fs::read_to_string(fixtures().join("secrets/private_key.txt")).unwrap();
    let (text, secrets) = fill(&template);
    let out = Redactor::default().redact(&text).into_owned();
    assert_no_leak(&out, &template, &secrets);
    assert!(out.contains("MIIBszCCAVmgAwIBAgIUKeepThisPublicCertificate"));
    insta::assert_snapshot!("private_key", out);
}

#[test]
fn each_shape_alone() {
    // One line per fake secret in a neutral context, so each detector is
    // shown to work on its own (not only thanks to a secret-looking key).
    let redactor = Redactor::default();
    let mut report = String::new();
    for (name, value) in fakes() {
        let skip = [
            "aws_secret",
            "db_password",
            "quoted_password",
            "unquoted_password",
            "json_token",
            "key_body",
            "bearer",
        ];
        if skip.contains(&name) {
            continue; // Only secret by context; covered by `every_shape_is_redacted`.
        }
        let line = format!("seen in the log: {value} (end)");
        let out = redactor.redact(&line);
        assert_no_leak(
            &out,
            "seen in the log:  (end)",
            std::slice::from_ref(&value),
        );
        report.push_str(&format!("{name}: {out}\n"));
    }
    insta::assert_snapshot!("each_shape", report);
}

#[test]
fn code_that_mentions_secrets_is_untouched() {
    let redactor = Redactor::default();
    let mut names: Vec<_> = fs::read_dir(fixtures().join("clean"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() >= 4);
    for path in names {
        let text = fs::read_to_string(&path).unwrap();
        let out = redactor.redact(&text);
        assert!(
            matches!(out, Cow::Borrowed(_)),
            "{} changed:\n{}",
            path.display(),
            similar::TextDiff::from_lines(text.as_str(), &*out).unified_diff()
        );
    }
    assert_eq!(redactor.redactions(), 0);
    for line in [
        "let token = next_token();",
        "self.token = token;",
        "let password = Password::new(raw)?;",
        "if secret.is_empty() { return; }",
        "token = tokens[i + 1]",
        "api_key = config.api_key",
    ] {
        assert!(matches!(redactor.redact(line), Cow::Borrowed(_)), "{line}");
    }
}

fn write(root: &Path, rel: &str, contents: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

#[test]
fn workspace_env_values_are_redacted_wherever_they_appear() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        ".env",
        "# local settings\n\
         DATABASE_URL=postgres://app:Pa55word-local@localhost:5432/app\n\
         export STRIPE_WEBHOOK=whsec_local_7f3a9c\n\
         SESSION_SIGNING='quoted value 123'\n\
         DB_PASSWORD=swordfish # the old one\n\
         APP_NAME=shopfront\n\
         NODE_ENV=production\n\
         PORT=3000\n\
         DEBUG=true\n\
         SHORT=abc\n\
         MULTI=\"line one 111\n\
         line two 222\"\n",
    );
    // Gitignored files are read too: secrets live there.
    write(root, ".gitignore", ".env*\nconfig/\n");
    write(
        root,
        "config/.env.local",
        "INTERNAL_HOST=db7.corp.internal\n",
    );
    write(
        root,
        "services/api/.env.production",
        "API_SIGNING=prod-signing-991\n",
    );
    // Not harvested: templates.
    write(root, ".env.example", "EXAMPLE_VALUE=example-value-123\n");
    // Harvested at any depth, in any directory (issue 39: a repository
    // could hide one five levels down or in a committed `node_modules`).
    write(
        root,
        "node_modules/pkg/.env",
        "DEP_VALUE=dependency-value-123\n",
    );
    write(root, "a/b/c/d/e/.env", "DEEP_VALUE=deep-value-123\n");

    let redactor = Redactor::from_workspace(root);
    assert_eq!(redactor.value_count(), 10, "{redactor:?}");
    let text = "connecting to postgres://app:Pa55word-local@localhost:5432/app\n\
                webhook secret whsec_local_7f3a9c, signing 'quoted value 123'\n\
                login with swordfish on db7.corp.internal (prod-signing-991)\n\
                multi: line one 111 / line two 222\n\
                shopfront in production on port 3000, DEBUG=true, SHORT=abc\n\
                untouched: example-value-123 dependency-value-123 deep-value-123\n";
    let out = redactor.redact(text);
    insta::assert_snapshot!("workspace_env", out);
    // The Debug form says how many, never what.
    assert!(!format!("{redactor:?}").contains("swordfish"));
}

#[test]
fn env_parsing() {
    let values = env_secret_values(
        "export A_TOKEN=\"abc 123\"\n\
         B_KEY='single-quoted-9'\n\
         C_URL=https://user:pw12@example.com # comment\n\
         D_SECRET=\"first line 1\n\
         second line 2\"\n\
         E_NAME=plainword\n\
         F_PASSWORD=plainword\n\
         G_REF=${A_TOKEN}\n\
         # H_COMMENTED=not-a-value-123\n\
         not an assignment\n\
         I_ID=1234567\n\
         J_PORT=8080\n",
    );
    assert_eq!(
        values,
        [
            "abc 123",
            "single-quoted-9",
            "https://user:pw12@example.com",
            "first line 1",
            "second line 2",
            "plainword",
            "1234567",
        ]
    );
}

#[test]
fn with_values_drops_trivial_values_and_prefers_the_longest() {
    let redactor = Redactor::with_values(vec![
        "true".into(),
        "abc".into(),
        "3000".into(),
        "localhost".into(),
        "secret-one".into(),
        "secret-one-extended".into(),
        "  padded-value  ".into(),
    ]);
    assert_eq!(redactor.value_count(), 3);
    assert_eq!(
        redactor.redact("true abc 3000 localhost secret-one-extended secret-one padded-value"),
        "true abc 3000 localhost [REDACTED] [REDACTED] [REDACTED]"
    );
    assert_eq!(redactor.redactions(), 3);
    let text = "nothing to see";
    assert!(matches!(redactor.redact(text), Cow::Borrowed(_)));
}
