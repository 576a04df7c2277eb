//! The redactor against encodings and key bodies: known values in base64
//! (every alignment, both alphabets, wrapped), hex, URL-encoding and the
//! dumps real tools print (`xxd`, `od`, `hexdump`); private keys without
//! their header, in the shapes tools show them. And the false positives it
//! must not hit. Keys and values are generated at run time (nothing
//! secret-looking is committed).
#![allow(clippy::unwrap_used, clippy::expect_used)] // in tests a panic is the failure report

use std::io::Write as _;
use std::process::{Command, Stdio};

use fettle::secrets::Redactor;

/// Deterministic pseudo-random bytes.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    text.as_bytes()
        .chunks(width)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect()
}

/// A fake RSA private key (PKCS#1 DER header, random body) as PEM lines.
fn fake_pem(seed: u64) -> Vec<String> {
    let mut der = vec![
        0x30, 0x82, 0x04, 0xa4, 0x02, 0x01, 0x00, 0x02, 0x82, 0x01, 0x01, 0x00,
    ];
    der.extend(noise(1180, seed));
    let mut lines = vec!["-----BEGIN RSA PRIVATE KEY-----".to_string()];
    lines.extend(wrap(&b64(&der), 64));
    lines.push("-----END RSA PRIVATE KEY-----".to_string());
    lines
}

/// A fake OpenSSH private key as its file's lines.
fn fake_openssh(seed: u64) -> Vec<String> {
    let mut raw = b"openssh-key-v1\0".to_vec();
    raw.extend(noise(380, seed));
    let mut lines = vec!["-----BEGIN OPENSSH PRIVATE KEY-----".to_string()];
    lines.extend(wrap(&b64(&raw), 70));
    lines.push("-----END OPENSSH PRIVATE KEY-----".to_string());
    lines
}

/// Every body line must be gone, and no 12-character piece of the body.
fn assert_no_body(out: &str, body: &[String], what: &str) {
    let joined: String = body.concat();
    for piece in wrap(&joined, 12) {
        if piece.len() == 12 {
            assert!(!out.contains(&piece), "{what}: {piece:?} leaked in\n{out}");
        }
    }
}

/// Runs `program args` with `input` on stdin; `None` when it is missing.
fn tool(program: &str, args: &[&str], input: &[u8]) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{program} {args:?} failed");
    Some(String::from_utf8(out.stdout).unwrap())
}

const VALUE: &str = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";
const PASSWORD: &str = "pa55/w+rd:Horse?";

fn env_file() -> String {
    format!("# local settings\nDEBUG=true\nOPENAI_API_KEY={VALUE}\nDB_PASSWORD=\"{PASSWORD}\"\nPORT=3000\n")
}

fn redactor() -> Redactor {
    Redactor::with_values(vec![VALUE.to_string(), PASSWORD.to_string()])
}

/// Neither value in plain, base64 (3 alignments, both alphabets), hex.
fn assert_values_gone(out: &str, what: &str) {
    for value in [VALUE, PASSWORD] {
        assert!(!out.contains(value), "{what}: plain value leaked:\n{out}");
        for prefix in ["", "x", "xy"] {
            let enc = b64(format!("{prefix}{value}").as_bytes());
            let core = &enc[4..enc.len() - 4];
            assert!(!out.contains(core), "{what}: base64 leaked:\n{out}");
        }
        let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
        assert!(
            !out.contains(&hex[2..hex.len() - 2]),
            "{what}: hex leaked:\n{out}"
        );
        assert!(
            !out.contains(&hex[2..hex.len() - 2].to_uppercase()),
            "{what}: HEX leaked:\n{out}"
        );
    }
    // Split by a dump's columns: a dozen characters in a row is too many.
    for piece in wrap(VALUE, 12).iter().filter(|p| p.len() == 12) {
        assert!(
            !out.contains(piece.as_str()),
            "{what}: {piece:?} leaked:\n{out}"
        );
    }
}

#[test]
fn env_values_in_every_encoding_tools_print() {
    let env = env_file();
    let redactor = redactor();
    let mut cases: Vec<(String, String)> = Vec::new();
    for args in [vec!["-w0"], vec![], vec!["-w", "50"]] {
        let out = tool("base64", &args, env.as_bytes()).unwrap();
        cases.push((format!("base64 {args:?}"), out.clone()));
        // Mid-stream, at each character offset (`cut -c 2-`, …).
        for skip in 1..4 {
            cases.push((
                format!("base64 {args:?} from char {skip}"),
                out[skip..].to_string(),
            ));
        }
        cases.push((
            format!("base64 {args:?} URL-safe"),
            out.replace('+', "-").replace('/', "_"),
        ));
    }
    for (program, args) in [
        ("xxd", vec!["-p"]),
        ("xxd", vec![]),
        ("xxd", vec!["-u", "-p"]),
        ("od", vec!["-c"]),
        ("od", vec!["-An", "-tx1"]),
        ("od", vec!["-tx1"]),
        ("od", vec!["-x"]),
        ("od", vec![]),
        ("hexdump", vec!["-C"]),
    ] {
        if let Some(out) = tool(program, &args, env.as_bytes()) {
            cases.push((format!("{program} {args:?}"), out));
        } else {
            eprintln!("{program} is not installed: case skipped");
        }
    }
    let url: String = PASSWORD
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    cases.push((
        "URL-encoded".into(),
        format!("GET /login?pw={url}&next=/ HTTP/1.1"),
    ));
    cases.push((
        "URL-encoded, lower".into(),
        format!("pw={}", url.to_lowercase()),
    ));
    let hex: String = VALUE.bytes().map(|b| format!("{b:02X}")).collect();
    cases.push(("hex inline".into(), format!("token bytes: {hex} (upper)")));
    // What a tool shows: numbered lines.
    let numbered: String = tool("base64", &[], env.as_bytes())
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{:>3}│ {l}\n", i + 1))
        .collect();
    cases.push(("numbered base64".into(), numbered));
    for (what, text) in &cases {
        let out = redactor.redact(text);
        assert_values_gone(&out, what);
    }
}

#[test]
fn private_key_bodies_without_their_header() {
    let redactor = Redactor::default();
    for (kind, lines) in [("pem", fake_pem(7)), ("openssh", fake_openssh(9))] {
        let body = &lines[1..lines.len() - 1];
        // tail -n +2 key.pem
        let tail = lines[1..].join("\n");
        assert_no_body(
            &redactor.redact(&tail),
            body,
            &format!("{kind}: tail -n +2"),
        );
        // read_file from line 3: numbered, no header, starts mid-key.
        let numbered: String = lines[2..]
            .iter()
            .enumerate()
            .map(|(i, l)| format!("{:>4}│ {l}\n", i + 3))
            .collect();
        assert_no_body(
            &redactor.redact(&numbered),
            &body[1..],
            &format!("{kind}: read_file"),
        );
        // A search for a fragment of a middle line: `path:line: text`.
        let hit = format!("notes/keep.txt:12:{}\n", body[5]);
        assert_no_body(
            &redactor.redact(&hit),
            std::slice::from_ref(&body[5]),
            &format!("{kind}: search"),
        );
        // base64 -w0 of the whole key file.
        let encoded = b64((lines.join("\n") + "\n").as_bytes());
        let out = redactor.redact(&encoded);
        assert!(
            out.len() < 100,
            "{kind}: base64 of the key file leaked: {out}"
        );
        // Inside a JSON string (a service-account file under another name).
        let json = format!("{{\"private_key\": \"{}\\n\"}}", lines[1..].join("\\n"));
        assert_no_body(&redactor.redact(&json), body, &format!("{kind}: json"));
    }
    // grep -r MII .: the first body line only, behind a path.
    let pem = fake_pem(11);
    let grep = format!(
        "./certs/server.pem:{}\n./src/main.rs:// MII is a prefix\n",
        pem[1]
    );
    let out = redactor.redact(&grep);
    assert_no_body(&out, &pem[1..2], "grep MII");
    assert!(out.contains("./src/main.rs:// MII is a prefix"), "{out}");
}

#[test]
fn real_keys_when_tools_exist() {
    let dir = tempfile::tempdir().unwrap();
    let redactor = Redactor::default();
    let rsa = dir.path().join("rsa.pem");
    let made = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&rsa)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let ssh = dir.path().join("id_ed25519");
    let made_ssh = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&ssh)
        .status()
        .is_ok_and(|s| s.success());
    for (made, path) in [(made, rsa), (made_ssh, ssh)] {
        if !made {
            eprintln!("cannot make {}: skipped", path.display());
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let body = &lines[1..lines.len() - 1];
        let tail = lines[1..].join("\n");
        assert_no_body(&redactor.redact(&tail), body, "real key, tail -n +2");
        let middle = lines[3..].join("\n");
        assert_no_body(
            &redactor.redact(&middle),
            &body[2..],
            "real key, from line 4",
        );
    }
}

#[test]
fn ordinary_text_is_left_alone() {
    let redactor = redactor();
    let pem = fake_pem(3);
    let mut cert_der = vec![
        0x30, 0x82, 0x03, 0x10, 0x30, 0x82, 0x02, 0xf8, 0xa0, 0x03, 0x02, 0x01, 0x02,
    ];
    cert_der.extend(noise(600, 5));
    let cert = format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        wrap(&b64(&cert_der), 64).join("\n")
    );
    let samples = [
        // Lockfiles and checksums.
        "[[package]]\nname = \"regex\"\nchecksum = \"b544ef1b4eac5dc2db33ea63606ae9ffcfac26c1416a2806ae0bf5f00a0f6bb9\"\n".to_string(),
        "\"integrity\": \"sha512-9e/ssBvEtxOEmIjXc0mYyuOIGtcHtAFvDCabqkNTK/Y0yKzY0xbpXLDv3b8sAJs2BfFQ1ku5xC5XnEZBtjNkhQ==\",\n".to_string(),
        "<script src=\"x.js\" integrity=\"sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC\"></script>\n".to_string(),
        "golang.org/x/text v0.3.7 h1:olpwvP2KacW1ZWvsR7uQhoyTYvKAupfQrRGBFM352Gk=\n".to_string(),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty.txt\n".to_string(),
        "id = \"3f2504e0-4f89-11d3-9a0c-0305e82c3301\"\n".to_string(),
        // Code with long identifiers and base64 test data.
        "fn parse_configuration_with_overrides(input: &str) -> Result<ConfigurationOverrides> {\n    let encoded = \"SGVsbG8sIFdvcmxkISBUaGlzIGlzIGEgdGVzdCBzdHJpbmcu\";\n}\n".to_string(),
        format!("img = \"data:image/png;base64,{}\"\n", b64(&noise(300, 1))),
        // A path through a module named like a secret word.
        "    .map(|m| crate::model::tokens::estimate(&m.content) as u64)\n".to_string(),
        "let secret_key: Key = keys::derive(&salt, \"é€\");\n".to_string(),
        // A certificate is public.
        cert,
        // A hex dump of an ordinary file.
        tool("od", &["-An", "-tx1"], b"just some ordinary file contents, nothing to see\n").unwrap(),
        tool("base64", &[], &noise(400, 2)).unwrap(),
    ];
    for sample in &samples {
        let out = redactor.redact(sample);
        assert_eq!(out, sample.as_str(), "changed:\n{sample}");
    }
    // Sanity: the same redactor does catch a key.
    assert_ne!(redactor.redact(&pem[1..].join("\n")), pem[1..].join("\n"));
}

#[test]
fn store_values_are_redacted_by_workspace_redactors() {
    let dir = tempfile::tempdir().unwrap();
    fettle::secrets::store::remember("H3_TEST_API_KEY", "xk-store-0123456789abcdef");
    let redactor = Redactor::from_workspace(dir.path());
    let out = redactor
        .redact("key: xk-store-0123456789abcdef; b64: eGstc3RvcmUtMDEyMzQ1Njc4OWFiY2RlZg==");
    assert!(!out.contains("xk-store-0123456789abcdef"), "{out}");
    assert!(!out.contains("eGstc3RvcmUtMDEyMzQ1Njc4OWFiY2RlZg"), "{out}");
}

// ---- Issue 39: transforms, pieces, split reads ----

fn rev(s: &str) -> String {
    s.chars().rev().collect()
}

use crate::agent_common::rot13;

/// Runs a shell pipeline on `input`; `None` when a tool is missing.
fn pipeline(script: &str, input: &[u8]) -> Option<String> {
    let tools_there = Command::new("sh")
        .arg("-c")
        .arg("command -v gzip base32 xxd rev fold >/dev/null")
        .status()
        .is_ok_and(|s| s.success());
    if !tools_there {
        return None;
    }
    tool("sh", &["-c", script], input)
}

/// No 10-character run of the value (plain, reversed or rot13) in the
/// output, with its whitespace taken out.
fn assert_no_run(out: &str, what: &str) {
    let flat: String = out.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    for shown in [VALUE.to_string(), rev(VALUE), rot13(VALUE)] {
        for piece in wrap(&shown, 10).iter().filter(|p| p.len() == 10) {
            assert!(
                !flat.contains(piece.as_str()),
                "{what}: {piece:?} leaked:\n{out}"
            );
        }
    }
}

#[test]
fn transformed_values_are_redacted() {
    let env = env_file();
    let redactor = redactor();
    let attacks = [
        "rev",
        "tr 'A-Za-z' 'N-ZA-Mn-za-m'",
        "rev | tr 'A-Za-z' 'N-ZA-Mn-za-m'",
        "gzip -c | base64",
        "gzip -c | base64 -w0",
        "gzip -c | xxd -p",
        "base32",
        "base32 -w0",
        "xxd -p | rev",
        "xxd -p | tr -d '\\n' | rev",
        "fold -w1",
        "grep -o .",
        "fold -w 32",
        "fold -w 7",
        "sed 's/./& /g'",
    ];
    let mut ran = 0;
    for attack in attacks {
        let Some(out) = pipeline(attack, env.as_bytes()) else {
            continue;
        };
        ran += 1;
        let red = redactor.redact(&out);
        assert_values_gone(&red, attack);
        assert_no_run(&red, attack);
        // The whole encoded block goes, not only the value's part of it.
        let flat_out: String = out.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let flat_red: String = red.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        if attack.contains("base") || attack.contains("xxd") {
            for piece in wrap(&flat_out, 24).iter().filter(|p| p.len() == 24) {
                assert!(
                    !flat_red.contains(piece.as_str()),
                    "{attack}: {piece:?} left:\n{red}"
                );
            }
        }
    }
    assert!(ran > 0 || std::env::var_os("CI").is_none(), "no tool ran");
}

#[test]
fn pieces_and_prefixes_of_values_are_redacted() {
    let redactor = redactor();
    // `cut -c1-12` of `KEY=<value>`: the value's first characters after `=`.
    let cut = "KEY=sk-test-\nDB_PASSWORD=\"pa55/w\nDEBUG=true\n";
    let out = redactor.redact(cut);
    assert_eq!(
        out,
        "KEY=[REDACTED]\nDB_PASSWORD=\"[REDACTED]\nDEBUG=true\n"
    );
    // `cut -c 20-40`, `head -c`: any 8 characters of a random-looking value.
    for piece in [&VALUE[12..30], &VALUE[20..], &VALUE[..20]] {
        let text = format!("line: {piece}\n");
        let out = redactor.redact(&text);
        assert!(!out.contains(&piece[..8]), "{piece}: {out}");
        assert!(out.contains("[REDACTED]"), "{out}");
    }
    // But not words that a value shares with code.
    let words = Redactor::with_values(vec![
        "deep-value-123".into(),
        "correct-horse-battery".into(),
    ]);
    let code = "let example = \"example-value-123\"; // correct-horse-battery-staple? no\n";
    assert_eq!(
        words.redact(code),
        code.replace("correct-horse-battery", "[REDACTED]")
    );
}

#[test]
fn a_value_split_across_tool_outputs_is_redacted_where_it_continues() {
    let redactor = redactor();
    let env = env_file();
    let at = env.find(VALUE).unwrap() + VALUE.len() - 5;
    // `head -c` then `tail -c +`: the second piece (5 characters) is short
    // of any 8-character piece; the window over the outputs catches it.
    let first = format!("<out>\nexit code 0\n{}\n</out>", &env[..at]);
    let second = format!("<out>\nexit code 0\n{}\n</out>", &env[at..]);
    let a = redactor.redact_in_sequence(&first).into_owned();
    let b = redactor.redact_in_sequence(&second).into_owned();
    assert!(!a.contains(&VALUE[..8]), "{a}");
    assert!(!b.contains(&VALUE[VALUE.len() - 5..]), "{b}");
    // Without the window (one text at a time) the tail would pass.
    let alone = redactor.redact(&second);
    assert!(alone.contains(&VALUE[VALUE.len() - 5..]), "{alone}");
}

#[test]
fn real_python_source_is_left_alone() {
    // The Python standard library, where installed: ~1 MB of real code.
    let lib = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let Some(lib) = lib.filter(|l| !l.is_empty()) else {
        return;
    };
    let redactor = redactor();
    for name in ["inspect.py", "typing.py", "argparse.py", "base64.py"] {
        let Ok(text) = std::fs::read_to_string(std::path::Path::new(&lib).join(name)) else {
            continue;
        };
        let out = redactor.redact_in_sequence(&text);
        assert_eq!(out, text.as_str(), "{name} changed");
    }
}

/// A `.env` that is a FIFO, or a link to `/dev/zero` or `/dev/stdin`, is
/// refused at once: the walk neither hangs nor reads without end, and the
/// workspace's other dotenv files are still read.
#[test]
fn dotenv_files_that_are_not_regular_files_are_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let fifo = std::ffi::CString::new(root.join(".env").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own, with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink("/dev/zero", root.join(".env.local")).unwrap();
    std::os::unix::fs::symlink("/dev/stdin", root.join(".env.stdin")).unwrap();
    std::fs::create_dir_all(root.join("app")).unwrap();
    std::fs::write(root.join("app/.env"), "REAL_TOKEN=Zq8xR2mK9vLpW4nT\n").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(
            Redactor::from_workspace(&root)
                .redact("x Zq8xR2mK9vLpW4nT")
                .into_owned(),
        );
    });
    // A hang fails the test instead of hanging CI.
    let out = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("building the redactor hung on a FIFO or device named .env");
    assert_eq!(out, "x [REDACTED]");
}
