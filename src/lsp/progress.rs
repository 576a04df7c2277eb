//! `$/progress` reporting: with the client's `workDoneToken` when given, else
//! a server-created token when the client supports `window.workDoneProgress`,
//! else nothing at all (reporting is best-effort and never fails a request).

use tower_lsp::lsp_types::notification::Progress as ProgressNotification;
use tower_lsp::lsp_types::request::WorkDoneProgressCreate;
use tower_lsp::lsp_types::{
    NumberOrString, ProgressParams, ProgressParamsValue, ProgressToken, WorkDoneProgress,
    WorkDoneProgressBegin, WorkDoneProgressCreateParams, WorkDoneProgressEnd,
    WorkDoneProgressReport,
};
use tower_lsp::Client;

use super::state::State;

pub struct Progress {
    client: Client,
    token: Option<ProgressToken>,
    /// Whether the client shows a cancel button (it then sends
    /// `window/workDoneProgress/cancel` with the token).
    cancellable: bool,
}

impl Progress {
    pub async fn begin(state: &State, title: &str, client_token: Option<ProgressToken>) -> Self {
        Self::begin_with(state, title, client_token, false).await
    }

    /// Like `begin`, offering the user a cancel button.
    pub async fn begin_cancellable(
        state: &State,
        title: &str,
        client_token: Option<ProgressToken>,
    ) -> Self {
        Self::begin_with(state, title, client_token, true).await
    }

    /// The token reports go to (none when the client takes no progress).
    pub fn token(&self) -> Option<&ProgressToken> {
        self.token.as_ref()
    }

    async fn begin_with(
        state: &State,
        title: &str,
        client_token: Option<ProgressToken>,
        cancellable: bool,
    ) -> Self {
        let progress = Self::acquire(state, client_token, cancellable).await;
        progress.start(title).await;
        progress
    }

    /// The progress's token (the client's, or one the client accepted),
    /// before anything is reported: a cancel button can only be pressed
    /// after [`Progress::start`], so whatever the token must stop can be
    /// registered in between.
    pub async fn acquire(
        state: &State,
        client_token: Option<ProgressToken>,
        cancellable: bool,
    ) -> Self {
        let token = match client_token {
            Some(token) => Some(token),
            None if client_supports_progress(state) => {
                let token = NumberOrString::String(state.next_progress_token());
                let created = state
                    .client
                    .send_request::<WorkDoneProgressCreate>(WorkDoneProgressCreateParams {
                        token: token.clone(),
                    })
                    .await;
                match created {
                    Ok(()) => Some(token),
                    Err(err) => {
                        tracing::debug!(%err, "client refused a progress token; reporting without progress");
                        None
                    }
                }
            }
            None => None,
        };
        Self {
            client: state.client.clone(),
            token,
            cancellable,
        }
    }

    /// Reports the start (the client shows the progress from here).
    pub async fn start(&self, title: &str) {
        self.send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
            title: title.to_owned(),
            cancellable: Some(self.cancellable),
            message: None,
            percentage: Some(0),
        }))
        .await;
    }

    pub async fn report(&self, message: String, percentage: Option<u32>) {
        self.send(WorkDoneProgress::Report(WorkDoneProgressReport {
            cancellable: Some(self.cancellable),
            message: Some(message),
            percentage,
        }))
        .await;
    }

    pub async fn end(self, message: String) {
        self.send(WorkDoneProgress::End(WorkDoneProgressEnd {
            message: Some(message),
        }))
        .await;
    }

    async fn send(&self, value: WorkDoneProgress) {
        if let Some(token) = &self.token {
            self.client
                .send_notification::<ProgressNotification>(ProgressParams {
                    token: token.clone(),
                    value: ProgressParamsValue::WorkDone(value),
                })
                .await;
        }
    }
}

fn client_supports_progress(state: &State) -> bool {
    state
        .capabilities()
        .and_then(|caps| caps.window.as_ref())
        .and_then(|window| window.work_done_progress)
        .unwrap_or(false)
}
