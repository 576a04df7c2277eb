//! Shaping command output into an observation a model can use: the head and
//! the tail (where errors and summaries are), the middle replaced by one
//! marker line that says how much was left out.
//!
//! [`HeadTail`] does the same while streaming, in bounded memory, so a
//! command that prints gigabytes costs no more than one that prints 20 KiB.

use std::collections::VecDeque;

/// What the model is told when a command succeeded and printed nothing, so
/// an empty observation is never mistaken for a lost one.
pub const NO_OUTPUT: &str = "ran successfully, no output";

/// Default budget for one observation (as Codex does): 10 KiB...
pub const DEFAULT_MAX_BYTES: usize = 10 * 1024;
/// ...and 256 lines, whichever is reached first.
pub const DEFAULT_MAX_LINES: usize = 256;

/// Keeps at most `max_bytes` and `max_lines` of `text`: half of each budget
/// from the start, half from the end, and between them a line
/// `[… N lines (M bytes) elided …]`. Cuts fall on line boundaries, or on a
/// char boundary when a single line is longer than its half of the budget.
/// Text within both limits is returned unchanged.
pub fn head_tail(text: &str, max_bytes: usize, max_lines: usize) -> String {
    let mut collector = HeadTail::new(max_bytes);
    collector.push(text.as_bytes());
    collector.finish(max_bytes, max_lines)
}

/// The marker line that replaces elided output.
pub fn elision_marker(lines: usize, bytes: usize) -> String {
    let unit = if lines == 1 { "line" } else { "lines" };
    format!("[… {lines} {unit} ({bytes} bytes) elided …]")
}

/// A streaming collector: remembers the first and the last `capacity` bytes
/// and counts the rest. Feed it chunks in arrival order with [`push`], then
/// [`finish`] with a budget no larger than `capacity`.
///
/// [`push`]: HeadTail::push
/// [`finish`]: HeadTail::finish
#[derive(Debug)]
pub struct HeadTail {
    capacity: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total_bytes: usize,
    total_newlines: usize,
}

impl HeadTail {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            head: Vec::new(),
            tail: VecDeque::new(),
            total_bytes: 0,
            total_newlines: 0,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.total_bytes += chunk.len();
        self.total_newlines += bytecount(chunk, b'\n');
        let room = self.capacity.saturating_sub(self.head.len());
        self.head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        let keep = &chunk[chunk.len().saturating_sub(self.capacity)..];
        self.tail.extend(keep);
        let excess = self.tail.len().saturating_sub(self.capacity);
        self.tail.drain(..excess);
    }

    /// Bytes pushed so far, kept or not.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// The shaped text. Invalid UTF-8 is replaced, not rejected: the model
    /// is better served by `�` than by no observation.
    pub fn finish(mut self, max_bytes: usize, max_lines: usize) -> String {
        let max_bytes = max_bytes.min(self.capacity);
        let total = self.total_bytes;
        let ends_with_newline = self.tail.back() == Some(&b'\n');
        let total_lines = self.total_newlines + usize::from(total > 0 && !ends_with_newline);
        let complete = total <= self.head.len();
        if complete && total <= max_bytes && total_lines <= max_lines {
            return String::from_utf8_lossy(&self.head).into_owned();
        }

        let head_bytes = max_bytes / 2;
        let head_lines = max_lines / 2;
        let head_end = keep_head(&self.head, head_bytes, head_lines);
        let tail = self.tail.make_contiguous();
        let tail_start = keep_tail(
            tail,
            max_bytes - head_bytes,
            max_lines.saturating_sub(head_lines),
        );
        let head_kept = &self.head[..head_end];
        let tail_kept = &tail[tail_start..];
        if head_kept.len() + tail_kept.len() >= total {
            // Only reachable when the whole text is in `head`: the budgets
            // overlap, so there is nothing to elide.
            return String::from_utf8_lossy(&self.head).into_owned();
        }

        let elided_bytes = total - head_kept.len() - tail_kept.len();
        let elided_newlines =
            self.total_newlines - bytecount(head_kept, b'\n') - bytecount(tail_kept, b'\n');
        // The elided region ends where the kept tail starts; if that is not
        // at a line start, the region's last line has no newline of its own.
        let region_ends_mid_line = match tail_start.checked_sub(1) {
            Some(i) => tail[i] != b'\n',
            // Only when the whole tail buffer is kept: what precedes it was
            // not kept, so assume a line boundary.
            None => false,
        };
        let elided_lines = elided_newlines + usize::from(region_ends_mid_line);

        let mut out = String::with_capacity(head_kept.len() + tail_kept.len() + 64);
        out.push_str(&String::from_utf8_lossy(head_kept));
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&elision_marker(elided_lines, elided_bytes));
        out.push('\n');
        out.push_str(&String::from_utf8_lossy(tail_kept));
        out
    }
}

fn bytecount(bytes: &[u8], needle: u8) -> usize {
    bytes.iter().filter(|&&b| b == needle).count()
}

fn is_char_start(b: u8) -> bool {
    // UTF-8 continuation bytes are 0b10xx_xxxx.
    b & 0xC0 != 0x80
}

/// End (exclusive) of the longest prefix of whole lines within both budgets;
/// if not even the first line fits, that line cut at a char boundary.
fn keep_head(bytes: &[u8], max_bytes: usize, max_lines: usize) -> usize {
    if max_lines == 0 || max_bytes == 0 {
        return 0;
    }
    let mut end = 0;
    let mut lines = 0;
    while end < bytes.len() && lines < max_lines {
        let line_end = match bytes[end..].iter().position(|&b| b == b'\n') {
            Some(i) => end + i + 1,
            None => bytes.len(),
        };
        if line_end > max_bytes {
            if lines == 0 {
                let mut cut = max_bytes.min(bytes.len());
                while cut > 0 && !is_char_start(bytes[cut]) {
                    cut -= 1;
                }
                return cut;
            }
            break;
        }
        end = line_end;
        lines += 1;
    }
    end
}

/// Start of the longest suffix of whole lines within both budgets; if not
/// even the last line fits, its end cut at a char boundary.
fn keep_tail(bytes: &[u8], max_bytes: usize, max_lines: usize) -> usize {
    if max_lines == 0 || max_bytes == 0 {
        return bytes.len();
    }
    let len = bytes.len();
    let mut start = len;
    let mut lines = 0;
    while start > 0 && lines < max_lines {
        // A line ends with its own newline, so search before it.
        let search_end = if start == len && bytes[len - 1] == b'\n' {
            len - 1
        } else if start == len {
            len
        } else {
            start - 1
        };
        let line_start = match bytes[..search_end].iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None => 0,
        };
        if len - line_start > max_bytes {
            if lines == 0 {
                let mut cut = len - max_bytes.min(len);
                while cut < len && !is_char_start(bytes[cut]) {
                    cut += 1;
                }
                return cut;
            }
            break;
        }
        start = line_start;
        lines += 1;
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(head_tail("a\nb\n", 100, 10), "a\nb\n");
        assert_eq!(head_tail("", 100, 10), "");
    }

    #[test]
    fn too_many_lines_keeps_head_and_tail() {
        let text: String = (1..=10).map(|i| format!("{i}\n")).collect();
        let out = head_tail(&text, 1000, 4);
        assert_eq!(out, "1\n2\n[… 6 lines (12 bytes) elided …]\n9\n10\n");
    }

    #[test]
    fn too_many_bytes_cuts_on_lines() {
        let text = "aaaa\nbbbb\ncccc\ndddd\n";
        // 10 bytes: 5 for the head ("aaaa\n"), 5 for the tail ("dddd\n").
        let out = head_tail(text, 10, 100);
        assert_eq!(out, "aaaa\n[… 2 lines (10 bytes) elided …]\ndddd\n");
    }

    #[test]
    fn one_long_line_is_cut_on_char_boundaries() {
        let text = "é".repeat(100); // 200 bytes, no newline
        let out = head_tail(&text, 11, 10);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0], "éé"); // 5 bytes allowed -> 2 chars
        assert_eq!(lines[2], "ééé"); // 6 bytes allowed -> 3 chars
        assert_eq!(lines[1], "[… 1 line (190 bytes) elided …]");
    }

    #[test]
    fn streaming_matches_whole_text() {
        let text: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
        let whole = head_tail(&text, 1024, 64);
        let mut c = HeadTail::new(1024);
        for chunk in text.as_bytes().chunks(77) {
            c.push(chunk);
        }
        assert_eq!(c.total_bytes(), text.len());
        assert_eq!(c.finish(1024, 64), whole);
        assert!(whole.starts_with("line 1\n"));
        assert!(whole.ends_with("line 5000\n"));
        assert!(whole.contains("[… 4936 lines ("), "{whole}");
    }

    #[test]
    fn no_trailing_newline() {
        let text: String = (1..=10).map(|i| format!("{i}\n")).collect::<String>() + "end";
        let out = head_tail(&text, 1000, 4);
        assert_eq!(out, "1\n2\n[… 7 lines (14 bytes) elided …]\n10\nend");
    }
}
