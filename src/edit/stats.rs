//! Rewrite statistics, kept in memory and never sent anywhere: requested,
//! applied, refused (by reason), and latency split into the server's own
//! time and the model's.
use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::Reason;
use crate::latency::{Percentiles, Samples};

#[derive(Default)]
pub struct Stats {
    requested: u64,
    applied: u64,
    refused: BTreeMap<Reason, u64>,
    server: Samples,
    model: Samples,
    editor: Samples,
    total: Samples,
    listing: Samples,
}

/// The `edit` part of `fettle/stats`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub requested: u64,
    pub applied: u64,
    /// Refusals by reason (`syntax_errors`, `document_changed`, …).
    pub refused: BTreeMap<&'static str, u64>,
    /// Request received → answered, minus the time waiting for the model
    /// and for the editor.
    pub server_ms: Percentiles,
    pub model_ms: Percentiles,
    /// Waiting for the editor: applying the edit (and its `didChange`),
    /// the user's confirmation.
    pub editor_ms: Percentiles,
    pub end_to_end_ms: Percentiles,
    /// Listing the code actions (`textDocument/codeAction`), server side.
    pub listing_ms: Percentiles,
}

impl Stats {
    /// A code-action listing took `took`.
    pub fn listed(&mut self, took: Duration) {
        self.listing.push(took);
    }

    pub fn requested(&mut self) {
        self.requested += 1;
    }

    /// A finished rewrite: `None` when applied, else why not; `model` and
    /// `editor` are the time spent waiting for them.
    pub fn finished(
        &mut self,
        refused: Option<Reason>,
        total: Duration,
        model: Duration,
        editor: Duration,
    ) {
        match refused {
            None => self.applied += 1,
            Some(reason) => *self.refused.entry(reason).or_default() += 1,
        }
        if refused == Some(Reason::Cancelled) {
            return; // its timing says nothing
        }
        self.total.push(total);
        self.server
            .push(total.saturating_sub(model).saturating_sub(editor));
        if !model.is_zero() {
            self.model.push(model);
        }
        if !editor.is_zero() {
            self.editor.push(editor);
        }
    }

    pub fn report(&self) -> Report {
        Report {
            requested: self.requested,
            applied: self.applied,
            refused: self.refused.iter().map(|(r, n)| (r.as_str(), *n)).collect(),
            server_ms: self.server.percentiles(),
            model_ms: self.model.percentiles(),
            editor_ms: self.editor.percentiles(),
            end_to_end_ms: self.total.percentiles(),
            listing_ms: self.listing.percentiles(),
        }
    }
}
