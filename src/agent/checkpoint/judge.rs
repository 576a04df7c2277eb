//! When undo must leave a file alone: anything changed after the task, on
//! disk or in the editor's buffer, is the user's and is never discarded
//! (unless they force it). What the checkpoint records to know it lives
//! here too.

use std::io;
use std::path::Path;

use super::{mode_bits, not_recorded, sha256_hex, write_atomic, Checkpoint, Left, BLOB_MODE};

impl Checkpoint {
    /// Why undo must leave `path` alone (`None`: it may restore it): the
    /// file on disk, or its open editor buffer (`buffer`), changed since
    /// the task. `force` overrides.
    pub fn judge(
        &self,
        path: &Path,
        buffer: Option<&str>,
        force: bool,
    ) -> io::Result<Option<String>> {
        let Some(entry) = self.entry(path) else {
            return Ok(None);
        };
        let current = self.workspace()?.read(path)?;
        let original = self.original_bytes(entry)?;
        Ok(skip_reason(&Facts {
            result: entry.result.as_ref(),
            result_buffer: entry.result_buffer.as_deref(),
            original: original.as_deref(),
            disk: current.as_deref(),
            buffer,
            force,
        }))
    }

    /// Notes the editor buffer's text the task left in `path` (recorded
    /// before), so a later restore can tell whether the user typed since.
    pub fn record_result_buffer(&mut self, path: &Path, text: &str) -> io::Result<()> {
        let Some(i) = self.manifest.files.iter().position(|e| e.path == path) else {
            return Err(not_recorded(path));
        };
        let hash = sha256_hex(text.as_bytes());
        if self.manifest.files[i].result_buffer.as_deref() == Some(hash.as_str()) {
            return Ok(());
        }
        let previous = self.manifest.files[i].result_buffer.replace(hash);
        if let Err(err) = self.save() {
            self.manifest.files[i].result_buffer = previous;
            return Err(err);
        }
        Ok(())
    }

    /// Takes `path`'s original again from the disk (and `buffer`): for a
    /// file recorded but not yet written whose content the user changed
    /// meanwhile (e.g. they agreed to save their unsaved changes first).
    /// What the task must give back is the user's text as it is now.
    pub fn rerecord_original(&mut self, path: &Path, buffer: Option<&str>) -> io::Result<()> {
        let Some(index) = self.manifest.files.iter().position(|e| e.path == path) else {
            return self.record(path, buffer);
        };
        let (blob, mode) = match self.workspace()?.read_with_metadata(path)? {
            Some((bytes, meta)) => {
                let name = index.to_string();
                write_atomic(&self.blob_path(&name), &bytes, Some(BLOB_MODE))?;
                (Some(name), Some(mode_bits(&meta)))
            }
            None => (None, None),
        };
        let buffer_blob = match buffer {
            Some(text) => {
                let name = format!("{index}.buffer");
                write_atomic(&self.blob_path(&name), text.as_bytes(), Some(BLOB_MODE))?;
                Some(name)
            }
            None => None,
        };
        let entry = &mut self.manifest.files[index];
        let previous = entry.clone();
        entry.blob = blob;
        entry.mode = mode;
        entry.buffer_blob = buffer_blob;
        if let Err(err) = self.save() {
            self.manifest.files[index] = previous;
            return Err(err);
        }
        Ok(())
    }
}

/// What undo knows about one file.
pub(super) struct Facts<'a> {
    /// What the task left on disk (`None`: nothing recorded).
    pub result: Option<&'a Left>,
    /// SHA-256 of the buffer text the task left, if the file was open then.
    pub result_buffer: Option<&'a str>,
    /// The bytes undo would put back (`None`: the task created the file).
    pub original: Option<&'a [u8]>,
    /// The file on disk now.
    pub disk: Option<&'a [u8]>,
    /// The open editor buffer now, if the file is open.
    pub buffer: Option<&'a str>,
    pub force: bool,
}

pub(super) const CHANGED_ON_DISK: &str = "changed on disk since the task";
pub(super) const CHANGED_IN_EDITOR: &str = "changed in the editor since the task";

/// Why undo must skip the file, or `None` to restore it.
pub(super) fn skip_reason(f: &Facts) -> Option<String> {
    if f.force {
        return None;
    }
    // Already the original: restoring loses nothing.
    let disk_reason = if f.disk == f.original {
        None
    } else {
        match (f.result, f.disk) {
            (Some(Left::Sha256(hash)), Some(bytes)) => {
                (sha256_hex(bytes) != *hash).then_some(CHANGED_ON_DISK)
            }
            (Some(Left::Sha256(_)), None) => Some("deleted since the task"),
            (Some(Left::Absent), Some(_)) => Some("created again since the task"),
            // No result recorded (a crash between record and write, or
            // nothing written): nothing to compare with, so restore.
            (Some(Left::Absent), None) | (None, _) => None,
        }
    };
    let buffer_reason = f.buffer.and_then(|text| {
        // What the editor should hold if the user did not touch it: the
        // buffer the task left, else (not open then) the file it left.
        let expected = match (f.result_buffer, f.result) {
            (Some(hash), _) => hash,
            (None, Some(Left::Sha256(hash))) => hash.as_str(),
            _ => return None,
        };
        let untouched = sha256_hex(text.as_bytes()) == expected;
        let already_original = f.original == Some(text.as_bytes());
        (!untouched && !already_original).then_some(CHANGED_IN_EDITOR)
    });
    match (disk_reason, buffer_reason) {
        (Some(CHANGED_ON_DISK), Some(_)) => {
            Some("changed on disk and in the editor since the task".to_owned())
        }
        (Some(disk), _) => Some(disk.to_owned()),
        (None, Some(buffer)) => Some(buffer.to_owned()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGINAL: &[u8] = b"def f():\n    pass\n";
    const RESULT: &[u8] = b"def f():\n    return 1\n";

    fn facts<'a>(
        result_hash: &'a Left,
        result_buffer: Option<&'a str>,
        disk: Option<&'a [u8]>,
        buffer: Option<&'a str>,
    ) -> Facts<'a> {
        Facts {
            result: Some(result_hash),
            result_buffer,
            original: Some(ORIGINAL),
            disk,
            buffer,
            force: false,
        }
    }

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap()
    }

    #[test]
    fn untouched_since_the_task_is_restored() {
        let left = Left::Sha256(sha256_hex(RESULT));
        let buffer_hash = sha256_hex(RESULT);
        assert_eq!(skip_reason(&facts(&left, None, Some(RESULT), None)), None);
        assert_eq!(
            skip_reason(&facts(
                &left,
                Some(&buffer_hash),
                Some(RESULT),
                Some(text(RESULT))
            )),
            None
        );
        // Not open at the end of the task, opened since, untouched.
        assert_eq!(
            skip_reason(&facts(&left, None, Some(RESULT), Some(text(RESULT)))),
            None
        );
    }

    #[test]
    fn a_later_change_on_disk_is_refused() {
        let left = Left::Sha256(sha256_hex(RESULT));
        let later = b"def f():\n    return 2\n";
        assert_eq!(
            skip_reason(&facts(&left, None, Some(later), None)).as_deref(),
            Some(CHANGED_ON_DISK)
        );
        assert_eq!(
            skip_reason(&facts(&left, None, None, None)).as_deref(),
            Some("deleted since the task")
        );
    }

    #[test]
    fn a_later_change_in_the_editor_is_refused_even_when_the_disk_is_untouched() {
        let left = Left::Sha256(sha256_hex(RESULT));
        let buffer_hash = sha256_hex(RESULT);
        let typed = "def f():\n    return 1\n\ndef g():\n    pass\n";
        assert_eq!(
            skip_reason(&facts(&left, Some(&buffer_hash), Some(RESULT), Some(typed))).as_deref(),
            Some(CHANGED_IN_EDITOR)
        );
        // Without a recorded buffer, the file the task left is the reference.
        assert_eq!(
            skip_reason(&facts(&left, None, Some(RESULT), Some(typed))).as_deref(),
            Some(CHANGED_IN_EDITOR)
        );
        // Typed and saved: both changed.
        assert_eq!(
            skip_reason(&facts(
                &left,
                Some(&buffer_hash),
                Some(typed.as_bytes()),
                Some(typed)
            ))
            .as_deref(),
            Some("changed on disk and in the editor since the task")
        );
    }

    #[test]
    fn already_back_to_the_original_is_not_a_change_to_protect() {
        let left = Left::Sha256(sha256_hex(RESULT));
        let buffer_hash = sha256_hex(RESULT);
        assert_eq!(
            skip_reason(&facts(
                &left,
                Some(&buffer_hash),
                Some(ORIGINAL),
                Some(text(ORIGINAL))
            )),
            None
        );
    }

    #[test]
    fn force_overrides_every_refusal() {
        let left = Left::Sha256(sha256_hex(RESULT));
        let buffer_hash = sha256_hex(RESULT);
        let mut f = facts(&left, Some(&buffer_hash), Some(b"other"), Some("typed"));
        assert!(skip_reason(&f).is_some());
        f.force = true;
        assert_eq!(skip_reason(&f), None);
    }

    #[test]
    fn nothing_recorded_restores() {
        let f = Facts {
            result: None,
            result_buffer: None,
            original: Some(ORIGINAL),
            disk: Some(b"half written"),
            buffer: Some("anything"),
            force: false,
        };
        assert_eq!(skip_reason(&f), None);
        let absent = Left::Absent;
        let f = Facts {
            result: Some(&absent),
            result_buffer: None,
            original: None,
            disk: Some(b"new"),
            buffer: None,
            force: false,
        };
        assert_eq!(
            skip_reason(&f).as_deref(),
            Some("created again since the task")
        );
    }
}
