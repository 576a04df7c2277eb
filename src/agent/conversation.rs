//! A conversation per workspace: a follow-up request (`fettle.chat` with
//! `"continue": true`, `fettle fix --continue`) is told what the earlier
//! requests were, how their tasks ended and what they changed, so "now also
//! handle the empty list" means something. The turns are kept in the
//! user's cache (`<cache>/conversations/<workspace hash>.json`, readable by
//! the user only) — not in the workspace, where a repository could plant
//! one — shared by the editor and the terminal, bounded in count and size.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The most earlier requests a follow-up is told about.
pub const MAX_TURNS: usize = 5;
/// The most of a task's summary and diff kept per turn.
const MAX_SUMMARY_CHARS: usize = 1_500;
const MAX_DIFF_CHARS: usize = 6_000;
/// A conversation file bigger than this is not read (it was not written
/// by Fettle).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// One request and how its task ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub task_id: String,
    /// What the user asked.
    pub request: String,
    /// `success`, `gave_up`, `failed`, `cancelled`.
    pub status: String,
    pub summary: String,
    /// What the task left changed (a unified diff), shortened.
    pub diff: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    pub turns: Vec<Turn>,
}

/// Where the workspace's conversation is kept, under `cache`.
fn path_for(cache: &Path, root: &Path) -> std::io::Result<PathBuf> {
    let root = std::fs::canonicalize(root)?;
    Ok(cache.join("conversations").join(format!(
        "{}.json",
        crate::agent::checkpoint::root_hash(&root)
    )))
}

/// The workspace's conversation; empty when there is none or it cannot be
/// read (logged: a follow-up then starts afresh rather than fails).
pub fn load(root: &Path) -> Conversation {
    load_in(&crate::agent::checkpoint::cache_dir(), root)
}

fn load_in(cache: &Path, root: &Path) -> Conversation {
    let Ok(path) = path_for(cache, root) else {
        return Conversation::default();
    };
    match crate::fsread::read_regular_to_string(&path, MAX_FILE_BYTES) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|err| {
            tracing::warn!(path = %path.display(), "conversation unreadable, starting afresh: {err}");
            Conversation::default()
        }),
        Err(crate::fsread::ReadError::NotFound { .. }) => Conversation::default(),
        Err(err) => {
            tracing::warn!(path = %path.display(), "conversation unreadable, starting afresh: {err}");
            Conversation::default()
        }
    }
}

/// Records a finished task: after the earlier turns when it `continued`
/// the conversation, else as the first of a new one. Returns how many
/// turns the conversation has now.
pub fn record(root: &Path, continued: bool, turn: Turn) -> std::io::Result<usize> {
    record_in(
        &crate::agent::checkpoint::cache_dir(),
        root,
        continued,
        turn,
    )
}

fn record_in(cache: &Path, root: &Path, continued: bool, turn: Turn) -> std::io::Result<usize> {
    let path = path_for(cache, root)?;
    let mut conversation = match continued {
        true => load_in(cache, root),
        false => Conversation::default(),
    };
    conversation.turns.push(Turn {
        request: shorten(&turn.request, MAX_SUMMARY_CHARS),
        summary: shorten(&turn.summary, MAX_SUMMARY_CHARS),
        diff: shorten(&turn.diff, MAX_DIFF_CHARS),
        ..turn
    });
    let excess = conversation.turns.len().saturating_sub(MAX_TURNS);
    conversation.turns.drain(..excess);
    let bytes = serde_json::to_vec_pretty(&conversation).map_err(std::io::Error::other)?;
    // Other people's code is in the diffs: the user's eyes only.
    crate::agent::fsutil::write_atomic(&path, &bytes, Some(0o600))?;
    Ok(conversation.turns.len())
}

impl Conversation {
    /// What a follow-up's first message says of the earlier requests;
    /// `None` when there were none.
    pub fn for_prompt(&self) -> Option<String> {
        if self.turns.is_empty() {
            return None;
        }
        let mut out = String::from(
            "This request follows earlier ones in this workspace (oldest first); the files are as those tasks left them, unless the user changed or undid them since.\n",
        );
        for (i, turn) in self.turns.iter().enumerate() {
            out.push_str(&format!(
                "{}. The user asked: {}\n   The task ended: {}. {}\n",
                i + 1,
                turn.request.trim(),
                turn.status,
                first_lines(&turn.summary, 6)
            ));
            if !turn.diff.trim().is_empty() {
                out.push_str("   What it changed:\n");
                for line in turn.diff.lines() {
                    out.push_str("   ");
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        Some(out)
    }
}

fn first_lines(text: &str, n: usize) -> String {
    text.trim().lines().take(n).collect::<Vec<_>>().join(" ")
}

/// At most `max` characters, with a mark where it was cut.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}\n… (cut)", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(request: &str) -> Turn {
        Turn {
            task_id: format!("t-{request}"),
            request: request.to_owned(),
            status: "success".to_owned(),
            summary: "Fixed add.".to_owned(),
            diff: "-    return a - b\n+    return a + b\n".to_owned(),
        }
    }

    #[test]
    fn a_follow_up_is_told_the_earlier_requests_and_a_new_one_starts_afresh() {
        let cache = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let (c, w) = (cache.path(), ws.path());
        assert_eq!(load_in(c, w), Conversation::default());
        assert_eq!(load_in(c, w).for_prompt(), None);
        assert_eq!(
            record_in(c, w, false, turn("make the tests pass")).unwrap(),
            1
        );
        assert_eq!(
            record_in(c, w, true, turn("also the empty list")).unwrap(),
            2
        );
        let text = load_in(c, w).for_prompt().unwrap();
        assert!(
            text.contains("1. The user asked: make the tests pass"),
            "{text}"
        );
        assert!(
            text.contains("2. The user asked: also the empty list"),
            "{text}"
        );
        assert!(text.contains("   +    return a + b"), "{text}");
        // Not continued: the earlier turns are dropped.
        assert_eq!(record_in(c, w, false, turn("something else")).unwrap(), 1);
        assert_eq!(load_in(c, w).turns.len(), 1);
        // The user's eyes only.
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path_for(c, w).unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn turns_and_their_sizes_are_bounded_and_a_bad_file_is_ignored() {
        let cache = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let (c, w) = (cache.path(), ws.path());
        for i in 0..(MAX_TURNS + 3) {
            let mut t = turn(&format!("request {i}"));
            t.diff = "+x\n".repeat(10_000);
            record_in(c, w, true, t).unwrap();
        }
        let conversation = load_in(c, w);
        assert_eq!(conversation.turns.len(), MAX_TURNS);
        assert_eq!(conversation.turns[0].request, "request 3");
        assert!(conversation
            .turns
            .iter()
            .all(|t| t.diff.len() < MAX_DIFF_CHARS + 20));
        std::fs::write(path_for(c, w).unwrap(), "{ not json").unwrap();
        assert_eq!(load_in(c, w), Conversation::default());
    }
}
