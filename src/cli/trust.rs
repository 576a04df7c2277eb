//! `fettle trust [PATH]`: shows what a workspace's `fettle.toml` sets that
//! Fettle ignores while the file is untrusted, and records trust in exactly
//! this content (`--revoke` forgets it). The record lives in the user's
//! config directory, never in the workspace.
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;

use crate::config::trust::{record_trust, TrustStore};
use crate::config::{workspace_config_path, ConfigLayers, Resolved};

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// Trust without asking (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Forget the trust recorded for this workspace.
    #[arg(long, conflicts_with = "yes")]
    revoke: bool,
    /// The workspace (default: the current directory).
    path: Option<PathBuf>,
}

pub fn run(args: TrustArgs) -> i32 {
    crate::logging::init("warn");
    let root = match super::workspace_or_cwd(args.path) {
        Ok(root) => root,
        Err(code) => return code,
    };
    let (layers, errors) = ConfigLayers::load_files(std::slice::from_ref(&root));
    for error in &errors {
        eprintln!("fettle: {error}");
    }
    let Some(store) = layers.trust_store_path() else {
        eprintln!("fettle: no place for the trust store: neither XDG_CONFIG_HOME nor HOME is set");
        return 2;
    };
    if args.revoke {
        return revoke(&store, &root);
    }
    let file = workspace_config_path(&root);
    let Some((sha256, trusted)) = layers.workspace_trust(&file) else {
        // A file that is there but refused has had its reason printed above.
        if errors.is_empty() || std::fs::symlink_metadata(&file).is_err() {
            eprintln!(
                "fettle: {} does not exist or cannot be read; nothing to trust",
                file.display()
            );
        }
        return 2;
    };
    println!("workspace: {}", root.display());
    println!("file:      {}", file.display());
    println!("sha256:    {sha256}");
    if trusted {
        println!("This content of the file is already trusted.");
        return 0;
    }
    match layers.resolve() {
        Ok(resolved) => show_ignored(&resolved, &file),
        // Trust can still be recorded: the keys count once the file is fixed.
        Err(err) => println!("The configuration is invalid: {err}"),
    }
    if !args.yes && !confirm() {
        println!("Not trusted.");
        return 1;
    }
    match record_trust(&store, &root, &sha256) {
        Ok(()) => {
            println!(
                "Trusted (recorded in {}). Any change to the file needs trust again.",
                store.display()
            );
            0
        }
        Err(err) => {
            eprintln!("fettle: cannot record trust: {err}");
            1
        }
    }
}

fn show_ignored(resolved: &Resolved, file: &Path) {
    let keys: Vec<_> = resolved.ignored.iter().filter(|k| k.file == file).collect();
    if keys.is_empty() {
        println!("It sets none of the keys Fettle ignores in untrusted workspaces.");
        return;
    }
    println!("While untrusted, Fettle ignores these keys it sets:");
    for key in keys {
        println!("  {}: {}", key.key, key.reason);
    }
}

/// Asks y/N on the terminal; anything but yes (or no terminal) is no.
fn confirm() -> bool {
    if !std::io::stdin().is_terminal() {
        eprintln!("fettle: stdin is not a terminal; pass --yes to trust without asking");
        return false;
    }
    print!("Trust this workspace's fettle.toml? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn revoke(store: &Path, root: &Path) -> i32 {
    let mut trust = match TrustStore::load(store) {
        Ok(trust) => trust,
        Err(err) => {
            eprintln!("fettle: {err}");
            return 1;
        }
    };
    if !trust.revoke(root) {
        println!("{} was not trusted.", root.display());
        return 0;
    }
    match trust.save(store) {
        Ok(()) => {
            println!("{} is no longer trusted.", root.display());
            0
        }
        Err(err) => {
            eprintln!("fettle: cannot update the trust store: {err}");
            1
        }
    }
}

/// The warning `fettle fix` (and other commands) print for each untrusted
/// workspace file whose keys were ignored.
pub fn warn_ignored(resolved: &Resolved) {
    for file in resolved.untrusted_files() {
        eprintln!(
            "fettle: warning: {} Review and trust it with `fettle trust {}`.",
            file.notice(),
            file.root().display()
        );
        for key in &file.keys {
            eprintln!("fettle:   {}: {}", key.key, key.reason);
        }
    }
}
