//! One text per file: the agent works on what the user sees (the open
//! buffer), and the disk, where the tests read, holds the same text.
//!
//! - Unsaved text in a buffer reaches the disk only by consent or rule
//!   (`agent.unsaved_buffers`: ask, save, skip), and before the checkpoint
//!   takes the file's original, so undo gives the user's text back.
//! - The editor saves the buffers the agent edited when it can (so it does
//!   not warn on the next save); otherwise Fettle writes the disk itself and
//!   says so when the task ends.

use std::io;
use std::path::Path;

use serde_json::json;

use super::{Files, PutError};
use crate::agent::types::{EditorNote, EventKind, TaskEvent};
use crate::config::UnsavedBuffers;

impl Files {
    /// How many writes were refused because their file was left alone.
    pub fn left_alone_refusals(&self) -> u32 {
        self.left_alone_refusals
    }

    /// The files left alone, relative to the workspace.
    pub fn left_alone_names(&self) -> Vec<String> {
        self.left_alone
            .keys()
            .map(|p| self.paths.relative(p))
            .collect()
    }

    /// Before the task's first write to an open file whose buffer differs
    /// from the disk: saves the user's text (asking first, per
    /// `agent.unsaved_buffers`), or refuses the write with a reason for the
    /// model. Later writes need nothing: the task owns the file's text then.
    pub(super) async fn consent(&mut self, path: &Path, buffer: &str) -> Result<(), PutError> {
        if self.written.contains(path) {
            return Ok(());
        }
        let disk = read_optional(path).map_err(PutError::Io)?;
        let unsaved = match &disk {
            Some(bytes) => bytes.as_slice() != buffer.as_bytes(),
            // A new, empty buffer holds nothing to lose.
            None => !buffer.is_empty(),
        };
        if !unsaved {
            return Ok(());
        }
        if let Some(why) = self.left_alone.get(path) {
            self.left_alone_refusals += 1;
            return Err(PutError::LeftAlone(why.clone()));
        }
        let rel = self.paths.relative(path);
        let save = match self.unsaved_policy {
            UnsavedBuffers::Save => true,
            UnsavedBuffers::Skip => false,
            UnsavedBuffers::Ask => self.host.ask_unsaved(path, &rel).await,
        };
        if !save {
            let rule = match self.unsaved_policy {
                UnsavedBuffers::Skip => "agent.unsaved_buffers = \"skip\" leaves such files alone",
                _ => "the user chose to leave it alone",
            };
            let why = format!(
                "{rel} is open in the editor with unsaved changes and {rule}: it cannot be \
                 changed in this task. Do not edit {rel}; make the change in other files, or \
                 say in your answer what the user should change in {rel}."
            );
            self.left_alone.insert(path.to_path_buf(), why.clone());
            self.left_alone_refusals += 1;
            return Err(PutError::LeftAlone(why));
        }
        // The freshest text: the user may have typed while being asked.
        let text = self.host.buffer(path).unwrap_or_else(|| buffer.to_owned());
        self.sync_disk(path, &text).await?;
        self.host.event(TaskEvent {
            task_id: self.task_id.clone(),
            kind: EventKind::Status,
            text: format!("Saved your unsaved changes in {rel} before editing it"),
            data: json!({ "path": rel }),
        });
        Ok(())
    }

    /// A file checkpointed earlier but not written yet whose content the
    /// user changed meanwhile (they saved, or agreed to save): its original
    /// is their text now, so nothing they wrote can be undone away.
    pub(super) fn refresh_original(&mut self, path: &Path) -> Result<(), PutError> {
        if self.written.contains(path) {
            return Ok(());
        }
        let Some(recorded) = self.originals.get(path) else {
            return Ok(());
        };
        let now = read_optional(path).map_err(PutError::Io)?;
        if *recorded == now {
            return Ok(());
        }
        let buffer = self.host.buffer(path);
        if let Some(checkpoint) = &mut self.checkpoint {
            checkpoint
                .rerecord_original(path, buffer.as_deref())
                .map_err(PutError::Io)?;
        }
        self.originals.insert(path.to_path_buf(), now);
        Ok(())
    }

    /// Makes the disk hold `text`, the open buffer's text: the editor saves
    /// it when it can (then it knows the file is saved); otherwise Fettle
    /// writes it and remembers that the editor still holds it as modified.
    /// Returns the bytes on disk.
    pub(super) async fn sync_disk(&mut self, path: &Path, text: &str) -> Result<Vec<u8>, PutError> {
        let outcome = self.host.save_buffers(&[path.to_path_buf()]).await;
        if outcome.saved.iter().any(|p| p == path) {
            match read_optional(path) {
                Ok(Some(bytes)) if bytes == text.as_bytes() => {
                    self.not_saved_by_editor.remove(path);
                    return Ok(bytes);
                }
                // The editor changed the text as it saved (format on save):
                // buffer and disk still agree, and that is what counts.
                Ok(Some(bytes))
                    if self
                        .host
                        .buffer(path)
                        .is_some_and(|b| b.as_bytes() == bytes.as_slice()) =>
                {
                    self.not_saved_by_editor.remove(path);
                    return Ok(bytes);
                }
                other => tracing::warn!(
                    path = %path.display(),
                    disk = ?other.map(|b| b.map(|b| b.len())),
                    "the editor reported the buffer saved, but the disk does not hold its text; writing it"
                ),
            }
        } else if let Some((_, why)) = outcome.failed.iter().find(|(p, _)| p == path) {
            tracing::debug!(path = %path.display(), why, "the editor did not save; writing the file");
        }
        self.disk
            .write_atomic(path, text.as_bytes(), None)
            .map_err(|err| PutError::Io(self.explain(path, err)))?;
        self.not_saved_by_editor.insert(path.to_path_buf());
        Ok(text.as_bytes().to_vec())
    }

    /// After the task: records the buffer text it left in every touched open
    /// file (so undo notices later typing), and says which files the user
    /// must look at: buffer and disk differ, the editor did not save, or
    /// the file was left alone.
    pub(super) fn editor_notes(&mut self) -> Vec<EditorNote> {
        let mut notes = Vec::new();
        for path in self.touched.clone() {
            let Some(buffer) = self.host.buffer(&path) else {
                continue;
            };
            if let Some(checkpoint) = &mut self.checkpoint {
                if let Err(err) = checkpoint.record_result_buffer(&path, &buffer) {
                    tracing::warn!(%err, "could not record the buffer the task left");
                }
            }
            let rel = self.paths.relative(&path);
            let disk = read_optional(&path).ok().flatten();
            if disk.as_deref() != Some(buffer.as_bytes()) {
                notes.push(EditorNote {
                    path,
                    kind: "unsynced",
                    message: format!(
                        "{rel}: the editor's buffer and the file on disk differ after the task \
                         (the tests ran against the file on disk). Compare them before saving: \
                         saving writes the buffer over the file, reloading discards the buffer's changes."
                    ),
                });
            } else if self.not_saved_by_editor.contains(&path) {
                notes.push(EditorNote {
                    path,
                    kind: "not_saved_by_editor",
                    message: format!(
                        "{rel}: the editor did not save the agent's changes, so Fettle wrote the \
                         file itself; the buffer holds the same text but is still marked modified. \
                         Save it (Vim: `:w!`) or reload it (Vim: `:e!`); nothing is lost either way."
                    ),
                });
            }
        }
        for path in self.left_alone.keys() {
            let rel = self.paths.relative(path);
            notes.push(EditorNote {
                path: path.clone(),
                kind: "left_alone",
                message: format!(
                    "{rel}: not edited, because it had unsaved changes that were to be left alone. \
                     Save it and run the task again to let the agent change it."
                ),
            });
        }
        notes
    }
}

/// An open document's file as it is on disk. Regular files only (a FIFO
/// or a device must not block or flood the task), at most
/// [`MAX_BUFFER_FILE_BYTES`].
fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match crate::fsread::read_regular(path, MAX_BUFFER_FILE_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.is_not_found() => Ok(None),
        Err(err) => Err(io::Error::other(err.to_string())),
    }
}

/// Far above any file an editor buffer and the agent work on.
const MAX_BUFFER_FILE_BYTES: u64 = 256 << 20;
