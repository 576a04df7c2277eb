//! Checker diagnostics in the editor (`check.on_save`): a save starts the
//! file's language checker for its workspace folder after
//! `check.debounce_ms` (a newer save of that folder and language restarts
//! the wait and cancels a run in progress), and what it reports is
//! published with source `fettle/<checker>`, next to the syntax
//! diagnostics of the same file (`publishDiagnostics` replaces a file's
//! whole list, so both kinds are kept here and sent together). Files that
//! had checker diagnostics and have none now are cleared.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tower_lsp::lsp_types::{
    Diagnostic, DiagnosticRelatedInformation, DiagnosticSeverity, Location, MessageType,
    NumberOrString, Position, Range, Url,
};

use super::state::State;
use crate::agent::checkers::{self, CheckDiagnostic, CheckReport, Environment, Severity};
use crate::position::{PositionEncoding, TextPoint};

type RunKey = (PathBuf, &'static str);

#[derive(Default)]
pub struct ChecksState {
    /// The checker diagnostics of each file (open or not), by the
    /// `(folder, language)` run that reported them.
    by_file: Mutex<HashMap<PathBuf, BTreeMap<RunKey, Vec<Diagnostic>>>>,
    /// The pending or running check per folder and language, with its id.
    running: Mutex<HashMap<RunKey, (u64, CancellationToken)>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl ChecksState {
    /// The checker diagnostics of `uri`'s file.
    fn checker_diagnostics(&self, uri: &Url) -> Vec<Diagnostic> {
        let Ok(path) = uri.to_file_path() else {
            return Vec::new();
        };
        self.by_file
            .lock()
            .get(&path)
            .map(|runs| runs.values().flatten().cloned().collect())
            .unwrap_or_default()
    }
}

/// Records `syntax`, the open document `uri`'s syntax diagnostics, and
/// tells completion the file's whole list (with the checker's), which it
/// returns for [`publish`]; `None` if the document is not open.
pub fn record_syntax(state: &State, uri: &Url, syntax: Vec<Diagnostic>) -> Option<Vec<Diagnostic>> {
    let mut all = state.documents.get_mut(uri).map(|mut open| {
        open.syntax_diagnostics = syntax.clone();
        syntax
    })?;
    all.extend(state.checks.checker_diagnostics(uri));
    tell_completion(state, uri, &all);
    Some(all)
}

/// Sends a file's whole list (from [`record_syntax`]) to the client.
pub async fn publish(state: &State, uri: Url, all: Vec<Diagnostic>, version: Option<i32>) {
    state.client.publish_diagnostics(uri, all, version).await;
}

/// The document was closed: its syntax diagnostics go, the checker's
/// (about the file on disk) stay.
pub async fn closed(state: &Arc<State>, uri: Url) {
    let checker = state.checks.checker_diagnostics(&uri);
    state.client.publish_diagnostics(uri, checker, None).await;
}

/// A file's whole list: its syntax diagnostics when open, and the checker's.
fn merged(state: &State, uri: &Url) -> Vec<Diagnostic> {
    let mut all = state
        .documents
        .get(uri)
        .map(|open| open.syntax_diagnostics.clone())
        .unwrap_or_default();
    all.extend(state.checks.checker_diagnostics(uri));
    all
}

async fn send(state: &Arc<State>, uri: Url, diagnostics: Vec<Diagnostic>, version: Option<i32>) {
    tell_completion(state, &uri, &diagnostics);
    publish(state, uri, diagnostics, version).await;
}

/// Completion's prompt mentions the problems near the cursor.
fn tell_completion(state: &State, uri: &Url, diagnostics: &[Diagnostic]) {
    if let Some(completion) = state.documents.get(uri).map(|d| d.completion.clone()) {
        completion.set_diagnostics(
            diagnostics
                .iter()
                .map(|d| (d.range.start.line as usize, d.message.clone()))
                .collect(),
        );
    }
}

/// `didSave`: schedules the file's checker when `check.on_save` is on.
pub fn saved(state: &Arc<State>, uri: &Url) {
    let config = state.config();
    if !(config.check.on_save && config.check.enabled) {
        return;
    }
    let Ok(path) = uri.to_file_path() else { return };
    let Some(language) = crate::syntax::Language::from_path(&path).map(checkers::language_key)
    else {
        return;
    };
    let Some(root) = workspace_root(state, &path) else {
        tracing::debug!(%uri, "saved outside the workspace folders: not checked");
        return;
    };
    let key: RunKey = (root, language);
    let cancel = CancellationToken::new();
    let id = state
        .checks
        .next_id
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let older = state
        .checks
        .running
        .lock()
        .insert(key.clone(), (id, cancel.clone()));
    if let Some((_, older)) = older {
        older.cancel();
    }
    let state = state.clone();
    tokio::spawn(async move {
        let debounce = Duration::from_millis(config.check.debounce_ms);
        tokio::select! {
            () = tokio::time::sleep(debounce) => {}
            () = cancel.cancelled() => return,
        }
        check(&state, &key, &path, &config, &cancel).await;
        // This run's own entry only; a newer save's stays.
        let mut running = state.checks.running.lock();
        if running.get(&key).is_some_and(|(current, _)| *current == id) {
            running.remove(&key);
        }
    });
}

/// The canonical workspace folder holding `path`.
fn workspace_root(state: &State, path: &Path) -> Option<PathBuf> {
    let roots = state.roots.read();
    roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .and_then(|r| r.canonicalize().ok())
}

async fn check(
    state: &Arc<State>,
    key: &RunKey,
    path: &Path,
    config: &crate::config::Config,
    cancel: &CancellationToken,
) {
    let (root, language) = (key.0.as_path(), key.1);
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let detected = checkers::detect(
        root,
        &config.check,
        std::slice::from_ref(&path),
        Some(language),
    );
    for missing in &detected.missing {
        if missing.first_report() {
            state
                .client
                .show_message(
                    MessageType::WARNING,
                    format!("fettle: {}", missing.message()),
                )
                .await;
        }
    }
    if detected.checkers.is_empty() {
        return;
    }
    let environment = match Environment::from_config(config, root) {
        Ok(environment) => environment,
        Err(err) => {
            state
                .client
                .show_message(
                    MessageType::ERROR,
                    format!("fettle: checkers not run: {err}"),
                )
                .await;
            return;
        }
    };
    if let Some(notice) = &environment.notice {
        state
            .client
            .show_message(MessageType::WARNING, format!("fettle: {notice}"))
            .await;
    }
    let report = checkers::run_checkers(
        &detected.checkers,
        Some(std::slice::from_ref(&path)),
        &environment.settings(root),
        cancel,
    )
    .await;
    if cancel.is_cancelled() {
        return;
    }
    for run in &report.runs {
        if let Some(failure) = &run.failure {
            tracing::warn!(checker = %run.checker.name, "{failure}");
            state
                .client
                .log_message(
                    MessageType::WARNING,
                    format!("fettle: the checker {} failed: {failure}", run.checker.name),
                )
                .await;
        }
    }
    publish_report(state, key, &report).await;
}

/// Publishes one run's diagnostics per file and clears the files it no
/// longer reports.
async fn publish_report(state: &Arc<State>, key: &RunKey, report: &CheckReport) {
    let encoding = state.encoding();
    let mut by_file: HashMap<PathBuf, Vec<Diagnostic>> = HashMap::new();
    for d in report.diagnostics() {
        by_file
            .entry(d.path.clone())
            .or_default()
            .push(to_lsp(d, encoding));
    }
    let mut touched = Vec::new();
    {
        let mut stored = state.checks.by_file.lock();
        // Files this run reported before and not now: cleared.
        stored.retain(|path, runs| {
            if !by_file.contains_key(path) && runs.remove(key).is_some() {
                touched.push(path.clone());
            }
            !runs.is_empty()
        });
        for (path, list) in by_file {
            stored
                .entry(path.clone())
                .or_default()
                .insert(key.clone(), list);
            touched.push(path);
        }
    }
    tracing::debug!(
        checkers = %report.names(),
        files = touched.len(),
        errors = report.errors(),
        "checker diagnostics published"
    );
    for path in touched {
        let Ok(uri) = Url::from_file_path(&path) else {
            continue;
        };
        let diagnostics = merged(state, &uri);
        send(state, uri, diagnostics, None).await;
    }
}

fn position(point: TextPoint, encoding: PositionEncoding) -> Position {
    point.to_position(encoding)
}

fn to_lsp(d: &CheckDiagnostic, encoding: PositionEncoding) -> Diagnostic {
    let range = |span: &checkers::Span| Range {
        start: position(span.start, encoding),
        end: position(span.end, encoding),
    };
    let related: Vec<DiagnosticRelatedInformation> = d
        .related
        .iter()
        .filter_map(|r| {
            Some(DiagnosticRelatedInformation {
                location: Location {
                    uri: Url::from_file_path(&r.path).ok()?,
                    range: range(&r.span),
                },
                message: r.message.clone(),
            })
        })
        .collect();
    Diagnostic {
        range: range(&d.span),
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
            Severity::Info => DiagnosticSeverity::INFORMATION,
            Severity::Hint => DiagnosticSeverity::HINT,
        }),
        code: d.code.clone().map(NumberOrString::String),
        source: Some(format!("fettle/{}", d.source)),
        message: d.message.clone(),
        related_information: (!related.is_empty()).then_some(related),
        ..Diagnostic::default()
    }
}
