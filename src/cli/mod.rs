//! The command line: `fettle [serve]`, `fettle doctor`, `fettle index`,
//! `fettle check`, `fettle fix`, `fettle trust`, `fettle model fetch`, `fettle mock-model`.
//! This is the one place allowed to print to stdout outside the protocol,
//! and only for subcommands that do not serve LSP.

use std::path::PathBuf;
use std::time::Instant;

mod check;
mod doctor;
mod fix;
mod model;
mod trust;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::config::ConfigLayers;
use crate::index::{IndexProgress, WorkspaceIndex};

#[derive(Debug, Parser)]
#[command(
    name = "fettle",
    version,
    about = "A language server that puts a code agent inside any LSP editor"
)]
struct Cli {
    /// Accepted and ignored: LSP always runs over stdio (VS Code passes this flag).
    #[arg(long, global = true, hide = true)]
    stdio: bool,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Speak LSP over stdin/stdout (the default).
    Serve,
    /// Print the resolved configuration (and where each value came from) and what is available.
    Doctor {
        /// The workspace whose `fettle.toml` to read (default: the current directory).
        path: Option<PathBuf>,
        /// Skip the round trip to each model (no network, no model loading).
        #[arg(long)]
        no_probe: bool,
        /// Probe only the models a feature uses (an editor's health check:
        /// loading an unused embedded model takes seconds).
        #[arg(long, conflicts_with = "no_probe")]
        only_used: bool,
    },
    /// Run the project's checkers (compiler, type checker, linter) and print their diagnostics.
    Check(check::CheckArgs),
    /// Repair the workspace headless: run the agent until the tests pass or the budget is spent.
    Fix(fix::FixArgs),
    /// Trust a workspace's fettle.toml: its keys that could send your API keys elsewhere or
    /// loosen the sandbox are ignored until you do (`--revoke` to forget).
    Trust(trust::TrustArgs),
    /// Manage the embedded model.
    Model {
        #[command(subcommand)]
        command: model::ModelCommand,
    },
    /// Internal: run a command in the agent's sandbox (see `agent::sandbox::runner`).
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec {
        /// Enter user, mount, PID and (without --network) network namespaces.
        #[arg(long)]
        namespaces: bool,
        /// Apply Landlock.
        #[arg(long)]
        landlock: bool,
        /// A path the command may write beneath (repeatable).
        #[arg(long = "write", value_name = "PATH")]
        write: Vec<PathBuf>,
        /// Keep the network.
        #[arg(long)]
        network: bool,
        /// The private temp dir.
        #[arg(long, value_name = "DIR")]
        tmp: Option<PathBuf>,
        /// A protected path: read-only, restored if created (repeatable).
        #[arg(long = "protect", value_name = "PATH")]
        protect: Vec<PathBuf>,
        /// The fd of the lifeline pipe's read end.
        #[arg(long, value_name = "FD")]
        lifeline: Option<i32>,
        /// Only report which namespace steps work here.
        #[arg(long)]
        probe: bool,
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Run the scriptable mock model server (for tests and development).
    #[command(name = "mock-model")]
    MockModel(model::MockModelArgs),
    /// Index a directory and print what the workspace index sees.
    Index {
        /// The directory to index (default: the current directory).
        path: Option<PathBuf>,
        /// Also run a fuzzy workspace-symbol query and print the best matches.
        #[arg(long)]
        query: Option<String>,
        /// Print the statistics as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Ends the process with `code` once what was printed is flushed, without
/// C/C++ `atexit` handlers or static destructors. The embedded model's
/// thread (loading weights, generating, tokenizing for a prompt) can be
/// inside llama.cpp at any moment; `exit(3)` would destroy llama.cpp's
/// globals under it, which crashed the server now and then (SIGSEGV after
/// `exit`, seen in CI as a failed exit status). Nothing of ours needs an
/// exit handler: files are written and closed before this point, and a
/// command's sandbox runner notices the lifeline pipe close.
pub fn exit(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit has no preconditions and never returns.
    unsafe { libc::_exit(code) }
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints usage errors to stderr (exit 2) and --help/--version to stdout (exit 0).
            let _ = err.print();
            return err.exit_code();
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(),
        Command::Doctor {
            path,
            no_probe,
            only_used,
        } => doctor::run(path, doctor::Probing::from_flags(no_probe, only_used)),
        Command::Check(args) => check::run(args),
        Command::Fix(args) => fix::run(args),
        Command::Trust(args) => trust::run(args),
        Command::Model { command } => model::run(command),
        Command::MockModel(args) => model::mock_model(args),
        Command::SandboxExec {
            namespaces,
            landlock,
            write,
            network,
            tmp,
            protect,
            lifeline,
            probe,
            command,
        } => {
            if probe {
                return crate::agent::sandbox::runner::probe();
            }
            crate::agent::sandbox::runner::main(&crate::agent::sandbox::runner::RunnerArgs {
                namespaces,
                landlock,
                write,
                network,
                tmp,
                protect,
                lifeline,
                command,
            })
        }
        Command::Index { path, query, json } => index(path, query, json),
    }
}

fn serve() -> i32 {
    // Warnings only until the configuration says otherwise (`log.level`,
    // default "warn"): editors show everything on stderr as errors.
    crate::logging::init(crate::config::LogConfig::default().level.as_str());
    let runtime = match crate::runtime::server() {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(%err, "could not start the async runtime");
            return 1;
        }
    };
    let code = runtime.block_on(crate::lsp::serve_stdio());
    // A model download still running would outlive the server.
    crate::model::local::fetch::stop_downloads();
    // Blocking work (a stdin read, an indexing walk) must not keep the process alive after exit.
    runtime.shutdown_background();
    code
}

/// The configuration for the workspace `root` (user and workspace files;
/// ignored untrusted keys reported on stderr); exit code 2 when a file or
/// the result is invalid, after saying why.
fn load_config(root: &std::path::Path) -> Result<crate::config::Config, i32> {
    let (layers, file_errors) = ConfigLayers::load_files(std::slice::from_ref(&root.to_path_buf()));
    if !file_errors.is_empty() {
        for error in &file_errors {
            eprintln!("fettle: {error}");
        }
        return Err(2);
    }
    match layers.resolve() {
        Ok(resolved) => {
            trust::warn_ignored(&resolved);
            Ok(resolved.config)
        }
        Err(err) => {
            eprintln!("fettle: invalid configuration: {err}");
            Err(2)
        }
    }
}

/// `path` (or the current directory), canonicalized; exit code 2 on failure.
fn workspace_or_cwd(path: Option<PathBuf>) -> Result<PathBuf, i32> {
    let path = match path {
        Some(path) => path,
        None => std::env::current_dir().map_err(|err| {
            eprintln!("fettle: cannot read the current directory: {err}");
            2
        })?,
    };
    std::fs::canonicalize(&path).map_err(|err| {
        eprintln!("fettle: {}: {err}", path.display());
        2
    })
}

fn index(path: Option<PathBuf>, query: Option<String>, json: bool) -> i32 {
    crate::logging::init("warn");
    let root = match workspace_or_cwd(path) {
        Ok(root) => root,
        Err(code) => return code,
    };
    let (layers, file_errors) = ConfigLayers::load_files(std::slice::from_ref(&root));
    for error in &file_errors {
        eprintln!("fettle: {error}");
    }
    let config = match layers.resolve() {
        Ok(resolved) => resolved.config,
        Err(err) => {
            eprintln!("fettle: invalid configuration: {err}");
            return 2;
        }
    };
    let index = WorkspaceIndex::new(crate::index::IndexSettings::from_config(&config.index));
    let started = Instant::now();
    let stats = index.index_roots(
        std::slice::from_ref(&root),
        &|_: IndexProgress| {},
        &CancellationToken::new(),
    );
    let elapsed = started.elapsed();
    let matches = query
        .as_deref()
        .map(|q| index.search(q, 20))
        .unwrap_or_default();
    if json {
        let matches: Vec<_> = matches
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": &*s.name, "kind": format!("{:?}", s.kind), "path": s.path.display().to_string(),
                    "line": s.selection.0.line + 1, "container": s.container.as_deref(),
                })
            })
            .collect();
        let out = serde_json::json!({
            "root": root.display().to_string(), "files": stats.files, "lines": stats.lines, "bytes": stats.bytes,
            "definitions": stats.definitions, "references": stats.references, "skipped": stats.skipped,
            "elapsed_ms": elapsed.as_secs_f64() * 1000.0, "matches": matches,
        });
        println!("{out}");
    } else {
        println!(
            "indexed {} files ({} lines, {} bytes) in {:.0} ms: {} definitions, {} references; {} files skipped",
            stats.files,
            stats.lines,
            stats.bytes,
            elapsed.as_secs_f64() * 1000.0,
            stats.definitions,
            stats.references,
            stats.skipped
        );
        for s in &matches {
            let container = s
                .container
                .as_deref()
                .map(|c| format!(" (in {c})"))
                .unwrap_or_default();
            println!(
                "{:?} {}{container}  {}:{}",
                s.kind,
                s.name,
                s.path.display(),
                s.selection.0.line + 1
            );
        }
    }
    0
}

/// A small runtime for the subcommands that do async work.
fn runtime() -> Result<tokio::runtime::Runtime, i32> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| {
            eprintln!("fettle: cannot start the async runtime: {err}");
            1
        })
}
