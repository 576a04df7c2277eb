//! Work done ahead of a request, while the user pauses: the local
//! model's cache warmed with the prompt a request nearby would send, and
//! the prompt itself built and kept for the request that comes.

use std::sync::Arc;

use super::prompt::{self, Prompt, Purpose, Target};
use super::{is_stale, sample, Engine, Env, Request};
use crate::completion::trigger::Decision;

impl Engine {
    /// Evaluates, ahead of time, the prompt a request at the end of the
    /// cursor's line would send, so that the first request nearby finds it
    /// in the local model's cache with the whole context (instead of a
    /// window cut to the latency target): at the cursor, at the line's end,
    /// on a new line below (Vim's `o`) or above (`O`), the prompt starts
    /// with what is cached (the layout is kept near a line, see
    /// `prompt.rs`). For when the user has paused there; any real request
    /// stops it. Does nothing for a remote model (nothing to warm), a
    /// secret file, or where a suggestion is already cached.
    pub async fn warm(self: &Arc<Self>, mut request: Request, env: Env<'_>) {
        let Ok(model) = &env.model else { return };
        if model.config().provider != crate::config::Provider::Local {
            return;
        }
        let document = &request.document;
        let secret = document
            .uri
            .to_file_path()
            .is_ok_and(|p| crate::secrets::is_secret_path(&p));
        if secret {
            return;
        }
        let rope = &document.rope;
        let line = rope.byte_to_line(request.cursor.min(rope.len_bytes()));
        let line_end = rope
            .get_line(line)
            .map(|l| {
                let text = l.to_string();
                let content = text.trim_end_matches(['\n', '\r']).len();
                rope.line_to_byte(line) + content
            })
            .unwrap_or(rope.len_bytes());
        request.cursor = line_end;
        let Some(at) = self.locate(&request, env.config).await else {
            return;
        };
        if self.cache.lock().get(&at.key).is_some() {
            return;
        }
        let model = model.clone();
        // The trigger's decision is not asked: the requests this prepares
        // are nearby, not necessarily here.
        let target = Target {
            cursor: at.cursor,
            line,
            multiline: false,
            stop: Vec::new(),
        };
        let built = prompt::build(
            self,
            &request,
            &env,
            &model,
            &at.text,
            target,
            Purpose::Warm,
        );
        let Some(Prompt { fim, .. }) = built.await else {
            return;
        };
        if is_stale(&request.revision) {
            return;
        }
        tracing::debug!(uri = %request.document.uri, line, "warming the completion prompt");
        model.warm(fim);
    }

    /// Builds, ahead of time, the prompt a request at `request.cursor`
    /// would send, and keeps it in the document's state: the request that
    /// comes while nothing it depends on changed (text, cursor, the other
    /// open documents, syntax errors, the index, the redactor, the layout,
    /// the configuration) sends it as is, without gathering context again.
    /// For after an edit's analysis, at the edit's end, where the user
    /// paused. Nothing is built in a secret file, where the trigger would
    /// not complete, or where a suggestion is already cached.
    pub async fn prepare(self: &Arc<Self>, request: Request, env: Env<'_>) {
        let Ok(model) = &env.model else { return };
        let secret = request
            .document
            .uri
            .to_file_path()
            .is_ok_and(|p| crate::secrets::is_secret_path(&p));
        if secret || request.selected.is_some() {
            return;
        }
        let Some(at) = self.locate(&request, env.config).await else {
            return;
        };
        let Decision::Complete {
            multiline, stop, ..
        } = at.decision
        else {
            return;
        };
        if self.cache.lock().get(&at.key).is_some() {
            tracing::debug!("no prompt built ahead: a suggestion is cached there");
            return;
        }
        let model = sample::with_deadline(model.clone(), env.config);
        let target = Target {
            cursor: at.cursor,
            line: request.document.rope.byte_to_line(request.cursor),
            multiline,
            stop,
        };
        let built = prompt::build(
            self,
            &request,
            &env,
            &model,
            &at.text,
            target,
            Purpose::Ahead,
        );
        built.await;
    }
}
