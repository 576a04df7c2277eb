//! `fettle doctor`: the resolved configuration with provenance, each
//! configured model checked with a tiny round trip, and the grammars.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::config::{Config, ConfigLayers, ModelConfig, Provider};
use crate::model::{ChatEvent, ChatRequest, FimRequest, GenOptions, Message, Model, ModelError};
use crate::syntax::Language;

/// Which models `fettle doctor` sends a round trip.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Probing {
    All,
    /// Those a feature uses (`--only-used`).
    Used,
    /// None (`--no-probe`).
    None,
}

impl Probing {
    pub(super) fn from_flags(no_probe: bool, only_used: bool) -> Self {
        match (no_probe, only_used) {
            (true, _) => Probing::None,
            (false, true) => Probing::Used,
            (false, false) => Probing::All,
        }
    }
}

pub(super) fn run(path: Option<PathBuf>, probing: Probing) -> i32 {
    crate::logging::init("warn");
    let root = match super::workspace_or_cwd(path) {
        Ok(root) => root,
        Err(code) => return code,
    };
    println!("fettle {}", env!("CARGO_PKG_VERSION"));
    println!("workspace: {}", root.display());
    let (layers, file_errors) = ConfigLayers::load_files(std::slice::from_ref(&root));
    let mut code = 0;
    for error in &file_errors {
        println!("error: {error}");
        code = 1;
    }
    println!();
    println!("configuration:");
    match layers.resolve() {
        Ok(resolved) => {
            for line in resolved.render().lines() {
                println!("  {line}");
            }
            for warning in &resolved.warnings {
                println!("warning: {warning}");
            }
            println!();
            trust_status(&layers, &resolved, &root);
            println!();
            if !models(&resolved.config, probing) {
                code = 1;
            }
        }
        Err(err) => {
            println!("error: {err}");
            code = 1;
        }
    }
    println!();
    sandbox(layers.resolve().ok().map(|r| r.config.agent));
    println!();
    if let Ok(resolved) = layers.resolve() {
        checkers(&root, &resolved.config.check);
        println!();
    }
    println!("grammars:");
    for language in Language::ALL {
        let status = if crate::syntax::parse_str(*language, "", None).is_some() {
            "ok"
        } else {
            "FAILED to load"
        };
        println!("  {:<12} {status}", language.name());
    }
    code
}

/// Whether the workspace's `fettle.toml` is trusted, and what is ignored while it is not.
/// The checkers `fettle check`, the agent and on-save diagnostics would
/// run here, and what is missing.
fn checkers(root: &std::path::Path, check: &crate::config::CheckConfig) {
    println!(
        "checkers (check.enabled = {}, check.on_save = {}):",
        check.enabled, check.on_save
    );
    let found = crate::agent::checkers::detect(root, check, &[], None);
    if found.checkers.is_empty() && found.missing.is_empty() {
        println!("  none for this folder (no Cargo.toml, go.mod, tsconfig.json, package.json or Python files, no check.commands)");
    }
    for checker in &found.checkers {
        let from = if checker.configured {
            "configured"
        } else {
            "detected"
        };
        println!("  {:<12} {} ({from})", checker.language, checker.command);
    }
    for missing in &found.missing {
        println!("  {:<12} MISSING: {}", missing.language, missing.message());
    }
}

fn trust_status(layers: &ConfigLayers, resolved: &crate::config::Resolved, root: &std::path::Path) {
    println!("workspace trust:");
    let file = crate::config::workspace_config_path(root);
    match layers.workspace_trust(&file) {
        // Present but refused (a FIFO, a device, too large): its error is
        // above; "no fettle.toml" would say the opposite of what is there.
        None if std::fs::symlink_metadata(&file).is_ok() => {
            println!(
                "  {} could not be read (see above): nothing to trust",
                file.display()
            )
        }
        None => println!("  no {} (nothing to trust)", file.display()),
        Some((sha256, true)) => println!("  {} trusted (sha256 {sha256})", file.display()),
        Some((sha256, false)) => {
            println!("  {} not trusted (sha256 {sha256})", file.display());
            let keys: Vec<_> = resolved.ignored.iter().filter(|k| k.file == file).collect();
            if keys.is_empty() {
                println!("  it sets no key that needs trust");
            }
            for key in keys {
                println!("  ignored: {}: {}", key.key, key.reason);
            }
            if !resolved.ignored.is_empty() {
                println!("  trust it with `fettle trust {}`", root.display());
            }
        }
    }
    if let Some(store) = layers.trust_store_path() {
        println!("  trust store: {}", store.display());
    }
}

/// Prints each model and, as `probing` says, its round-trip check.
/// Returns false when a model that a feature uses is broken.
fn models(config: &Config, probing: Probing) -> bool {
    println!("models:");
    let runtime = match super::runtime() {
        Ok(r) => r,
        Err(_) => return false,
    };
    let mut healthy = true;
    for (name, model) in &config.models {
        let used_by = config.features_using(name);
        let used = if used_by.is_empty() {
            "unused".to_string()
        } else {
            format!("used by {}", used_by.join(", "))
        };
        println!("  {name} ({}, {used}): {}", model.provider, describe(model));
        if let Some(var) = model.api_key_env.as_deref().filter(|v| !v.is_empty()) {
            // Moved out of the environment at start-up: ask the store.
            let state = if crate::secrets::store::is_set(var) {
                "set"
            } else {
                "NOT SET"
            };
            println!("    api key: ${var} is {state}");
        }
        if probing == Probing::None {
            continue;
        }
        if probing == Probing::Used && used_by.is_empty() {
            println!("    not probed: no feature uses it");
            continue;
        }
        let builtin_coder = crate::config::CODER_MODELS.iter().any(|(n, _)| n == name);
        let missing = model.expanded_path().is_none_or(|p| !p.is_file());
        if builtin_coder && used_by.is_empty() && missing {
            // Known by name, not installed, not used: nothing is wrong.
            println!("    not installed: `fettle model fetch {name}` installs it");
            continue;
        }
        // The path each feature will use: FIM for completion (and for the
        // embedded model, whose probe also proves the weights load), chat
        // for edits and the agent.
        let local = model.provider == Provider::Local;
        let fim = local || used_by.contains(&"completion");
        let chat = !local && (used_by.is_empty() || used_by.iter().any(|f| *f != "completion"));
        for (kind, wanted) in [(Probe::Fim, fim), (Probe::Chat, chat)] {
            if !wanted {
                continue;
            }
            match runtime.block_on(probe(name, model, kind)) {
                Ok(report) => {
                    println!("    ok: {}", report.line);
                    if kind == Probe::Fim && !local && report.first > SLOW_FOR_GHOST_TEXT {
                        println!(
                            "    slow for ghost text: the first output took {} ms; a suggestion should show in well under a second (try a smaller or nearer model for completion.model)",
                            report.first.as_millis()
                        );
                    }
                }
                Err(err) => {
                    println!("    FAILED: {err}");
                    healthy &= used_by.is_empty();
                }
            }
        }
    }
    runtime.shutdown_timeout(Duration::from_millis(100));
    healthy
}

fn describe(model: &ModelConfig) -> String {
    match model.provider {
        Provider::Local => model
            .expanded_path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(no path)".to_string()),
        _ => format!(
            "{} at {}",
            model.model.as_deref().unwrap_or("(server default)"),
            model.effective_base_url().unwrap_or_default()
        ),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    Fim,
    Chat,
}

/// A remote completion model whose first output takes longer than this
/// cannot give ghost text while typing.
const SLOW_FOR_GHOST_TEXT: Duration = Duration::from_millis(1000);

struct ProbeReport {
    line: String,
    first: Duration,
}

/// A tiny request: a few tokens of FIM (what completion uses; for the
/// local model it also proves the weights load), or a one-word chat (which
/// proves the server is reachable, the key accepted and the model known).
async fn probe(name: &str, config: &ModelConfig, kind: Probe) -> Result<ProbeReport, ModelError> {
    if config.provider == Provider::Local {
        let path = crate::model::local::check_weights(name, config)?;
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        println!("    weights: present, {:.1} MB", size as f64 / 1e6);
    }
    let model = Model::new(name, config)?;
    let options = GenOptions {
        max_tokens: Some(4),
        temperature: Some(0.0),
        stop: Vec::new(),
        latency_target: None,
    };
    let started = Instant::now();
    let mut first = None;
    let mut text = String::new();
    if kind == Probe::Fim {
        let mut stream = model.fim(FimRequest {
            prefix: "fn add(a: i32, b: i32) -> i32 {\n    ".to_string(),
            suffix: "\n}\n".to_string(),
            options,
            ..Default::default()
        });
        while let Some(piece) = stream.next().await {
            first.get_or_insert_with(|| started.elapsed());
            text.push_str(&piece?);
        }
    } else {
        let mut stream = model.chat(ChatRequest {
            messages: vec![Message::user("Reply with the single word OK.")],
            tools: Vec::new(),
            options,
        });
        while let Some(event) = stream.next().await {
            first.get_or_insert_with(|| started.elapsed());
            if let ChatEvent::TextDelta(t) = event? {
                text.push_str(&t);
            }
        }
    }
    let total = started.elapsed();
    let first = first.unwrap_or(total);
    let what = match (kind, config.provider == Provider::Local) {
        (_, true) => "",
        (Probe::Fim, false) => "FIM (completion) ",
        (Probe::Chat, false) => "chat ",
    };
    Ok(ProbeReport {
        line: format!(
            "{what}answered {:?} (first output after {} ms, done in {} ms)",
            crate::model::shorten_for_display(&text, 40),
            first.as_millis(),
            total.as_millis()
        ),
        first,
    })
}

/// What the sandbox for tests and commands enforces on this system.
fn sandbox(agent: Option<crate::config::AgentConfig>) {
    use crate::agent::sandbox;
    let agent = agent.unwrap_or_default();
    println!("sandbox (agent.sandbox = \"{}\"):", agent.sandbox);
    let support = match std::env::current_exe() {
        Ok(exe) => sandbox::probe::probe_now(&exe),
        Err(err) => {
            println!("  cannot find the fettle binary: {err}");
            return;
        }
    };
    for (name, label) in sandbox::probe::STEPS {
        let state = match support.steps.iter().find(|(n, _)| n == name) {
            Some((_, None)) => "yes".to_owned(),
            Some((_, Some(err))) => format!("no ({err})"),
            None => "not tried".to_owned(),
        };
        println!("  {label:<18} {state}");
    }
    let abi = support.landlock_abi;
    if abi == 0 {
        println!("  {:<18} no", "Landlock");
    } else {
        let tcp = if abi >= 4 { "yes" } else { "no (ABI < 4)" };
        let scopes = if abi >= 6 { "yes" } else { "no (ABI < 6)" };
        println!("  {:<18} ABI {abi}: filesystem yes, TCP {tcp}, scopes (abstract sockets, signals) {scopes}", "Landlock");
    }
    if agent.sandbox == crate::config::SandboxMode::Off {
        println!("  off: commands are not confined (their processes still die with the task)");
        return;
    }
    if agent.sandbox == crate::config::SandboxMode::Workspace && !support.missing().is_empty() {
        println!(
            "  error: \"workspace\" needs {}: tasks will fail",
            support.missing().join(" and ")
        );
    }
    let (enforced, not) = support.describe(agent.sandbox_network);
    println!("  enforced:");
    for line in enforced {
        println!("    - {line}");
    }
    println!("  not enforced:");
    for line in not {
        println!("    - {line}");
    }
}
