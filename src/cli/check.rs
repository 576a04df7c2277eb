//! `fettle check [--json] [PATH]`: runs the project's checkers (the ones
//! the agent and on-save diagnostics use) and prints what they found.
//! stdout: one `path:line:col: severity[code]: message` line per
//! diagnostic, or with `--json` an array of objects; stderr: what ran and
//! the totals. Exit codes: 0 no errors, 1 errors, 2 usage errors or
//! nothing to check.

use std::path::PathBuf;

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::agent::checkers::{self, detect, run_checkers, Environment};
use crate::syntax::Language;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the diagnostics as a JSON array (0-based ranges, UTF-16 columns).
    #[arg(long)]
    json: bool,
    /// A project folder (default: the current directory), or one file: its
    /// language's checker runs in its project and only its diagnostics count.
    path: Option<PathBuf>,
}

pub fn run(args: CheckArgs) -> i32 {
    crate::logging::init("warn");
    let target = match super::workspace_or_cwd(args.path.clone()) {
        Ok(path) => path,
        Err(code) => return code,
    };
    let (root, file) = if target.is_file() {
        (checkers::project_root_of(&target), Some(target))
    } else {
        (target, None)
    };
    let only = match &file {
        Some(file) => match Language::from_path(file) {
            Some(language) => Some(checkers::language_key(language)),
            None => {
                eprintln!("fettle: {}: not a language Fettle checks", file.display());
                return 2;
            }
        },
        None => None,
    };
    let config = match super::load_config(&root) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let hint: Vec<PathBuf> = file.iter().cloned().collect();
    let detected = detect(&root, &config.check, &hint, only);
    for missing in &detected.missing {
        eprintln!("fettle: {}", missing.message());
    }
    if detected.checkers.is_empty() {
        if detected.missing.is_empty() {
            eprintln!(
                "fettle: nothing to check in {}: no Cargo.toml, go.mod, tsconfig.json, package.json or Python files, and no check.commands",
                root.display()
            );
        }
        return 2;
    }
    let environment = match Environment::from_config(&config, &root) {
        Ok(environment) => environment,
        Err(err) => {
            eprintln!("fettle: {err}");
            return 2;
        }
    };
    if let Some(notice) = &environment.notice {
        eprintln!("fettle: {notice}");
    }
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let cancel = CancellationToken::new();
    let mut report = runtime.block_on(async {
        let on_interrupt = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_interrupt.cancel();
            }
        });
        for checker in &detected.checkers {
            eprintln!(
                "fettle: checking {} with `{}`",
                checker.language, checker.command
            );
        }
        run_checkers(
            &detected.checkers,
            file.as_ref().map(std::slice::from_ref),
            &environment.settings(&root),
            &cancel,
        )
        .await
    });
    if let Some(file) = &file {
        for run in &mut report.runs {
            run.diagnostics.retain(|d| &d.path == file);
        }
    }
    if args.json {
        println!("{}", report.json(&root));
    } else {
        print!("{}", report.human(&root));
    }
    for run in &report.runs {
        let warnings = run
            .diagnostics
            .iter()
            .filter(|d| d.severity == checkers::Severity::Warning)
            .count();
        eprintln!(
            "fettle: {}: {} error(s), {warnings} warning(s) in {:.1} s",
            run.checker.name,
            run.errors(),
            run.elapsed.as_secs_f64()
        );
    }
    if cancel.is_cancelled() {
        eprintln!("fettle: interrupted");
        return 1;
    }
    i32::from(report.errors() > 0)
}
