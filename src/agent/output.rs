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

/// The most one `fettle/taskEvent` (or one line of `fettle fix --json`, the
/// task result) may take, serialized: a command that writes a gigabyte must
/// not turn into a gigabyte of JSON for the editor or the terminal.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;
/// The most one string of an event or of the result keeps (head and tail).
pub const MAX_FIELD_BYTES: usize = 256 * 1024;
/// The most all the events of one task take together; past it, events
/// keep their kind and a short text, and their data says what was left out.
pub const MAX_TASK_EVENT_BYTES: usize = 16 * 1024 * 1024;
/// What a string past the budget keeps of its text, once data is dropped.
const SHORT_TEXT_BYTES: usize = 1024;
/// Items an array keeps once strings alone do not bring a value under its
/// budget (half from the start, half from the end).
const MAX_ITEMS: usize = 200;

/// `text` within `max_bytes`: unchanged when it fits, else its head and
/// tail around one marker line that counts what was left out (lines are
/// not limited).
pub fn bound_text(text: &str, max_bytes: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max_bytes {
        return std::borrow::Cow::Borrowed(text);
    }
    // The marker takes a few dozen bytes of the budget.
    let budget = max_bytes.saturating_sub(64).max(2);
    std::borrow::Cow::Owned(head_tail(text, budget, usize::MAX))
}

/// The serialized size of `value` (counted, not built).
pub fn json_size(value: &(impl serde::Serialize + ?Sized)) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Brings `value` within `max_bytes` serialized: every string is cut to
/// its head and tail (at most [`MAX_FIELD_BYTES`], less while the whole is
/// still too big), then long arrays keep their ends. Returns whether
/// anything was cut. A value that still does not fit (thousands of keys) is
/// replaced by a note saying so.
pub fn bound_json(value: &mut serde_json::Value, max_bytes: usize) -> bool {
    let mut size = json_size(value);
    if size <= max_bytes && !has_long_string(value, MAX_FIELD_BYTES) {
        return false;
    }
    let mut field = MAX_FIELD_BYTES.min(max_bytes);
    loop {
        cut_strings(value, field);
        size = json_size(value);
        if size <= max_bytes || field <= SHORT_TEXT_BYTES {
            break;
        }
        field /= 2;
    }
    if size > max_bytes {
        cut_arrays(value, MAX_ITEMS);
        size = json_size(value);
    }
    if size > max_bytes {
        *value = serde_json::json!({ "omitted": format!("{size} bytes of JSON (over the {max_bytes}-byte limit)") });
    }
    true
}

fn has_long_string(value: &serde_json::Value, max: usize) -> bool {
    use serde_json::Value;
    match value {
        // JSON escapes can make a string up to six times longer (`\u0000`).
        Value::String(s) => s.len() > max / 6,
        Value::Array(items) => items.iter().any(|v| has_long_string(v, max)),
        Value::Object(map) => map.values().any(|v| has_long_string(v, max)),
        _ => false,
    }
}

/// Cuts every string of `value` to `max` serialized bytes at most.
fn cut_strings(value: &mut serde_json::Value, max: usize) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            // Escapes count: a NUL takes six bytes in JSON.
            let escaped = json_size(s.as_str());
            if escaped > max {
                let ratio = escaped.div_ceil(s.len().max(1));
                *s = bound_text(s, max / ratio.max(1)).into_owned();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| cut_strings(v, max)),
        Value::Object(map) => map.values_mut().for_each(|v| cut_strings(v, max)),
        _ => {}
    }
}

/// Keeps the first and last `max / 2` items of every array longer than
/// `max`, with a string in between that counts the rest.
fn cut_arrays(value: &mut serde_json::Value, max: usize) {
    use serde_json::Value;
    match value {
        Value::Array(items) => {
            if items.len() > max {
                let omitted = items.len() - max;
                let tail = items.split_off(items.len() - max / 2);
                items.truncate(max / 2);
                items.push(Value::String(format!("… {omitted} items omitted …")));
                items.extend(tail);
            }
            items.iter_mut().for_each(|v| cut_arrays(v, max));
        }
        Value::Object(map) => map.values_mut().for_each(|v| cut_arrays(v, max)),
        _ => {}
    }
}

/// Keeps the events of one task within [`MAX_TASK_EVENT_BYTES`] in all and
/// [`MAX_EVENT_BYTES`] each.
#[derive(Debug, Default)]
pub struct EventBudget {
    spent: usize,
    said_over: bool,
}

impl EventBudget {
    /// Shapes one event's `text` and `data` to fit; `final_event` (the
    /// task's last status) always gets through at full size.
    pub fn shape(&mut self, text: &mut String, data: &mut serde_json::Value, final_event: bool) {
        if let std::borrow::Cow::Owned(cut) = bound_text(text, MAX_FIELD_BYTES) {
            *text = cut;
        }
        let mut wrapped =
            serde_json::json!({ "text": std::mem::take(text), "data": std::mem::take(data) });
        bound_json(&mut wrapped, MAX_EVENT_BYTES - 256);
        let mut size = json_size(&wrapped);
        if !final_event && self.spent.saturating_add(size) > MAX_TASK_EVENT_BYTES {
            // Past the task's total: the kind and a short text still tell
            // the story; the bulk is left out, and said to be.
            let short = wrapped["text"]
                .as_str()
                .map(|t| bound_text(t, SHORT_TEXT_BYTES).into_owned())
                .unwrap_or_default();
            wrapped = serde_json::json!({
                "text": short,
                "data": { "omitted": format!("this task's events passed {MAX_TASK_EVENT_BYTES} bytes; the rest carry their text only") },
            });
            size = json_size(&wrapped);
            self.said_over = true;
        }
        self.spent = self.spent.saturating_add(size);
        if let serde_json::Value::Object(mut map) = wrapped {
            if let Some(serde_json::Value::String(t)) = map.remove("text") {
                *text = t;
            }
            if let Some(d) = map.remove("data") {
                *data = d;
            }
        }
    }

    /// Whether events were shortened for the task's total budget.
    pub fn over(&self) -> bool {
        self.said_over
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
    fn json_is_bounded_strings_keep_head_and_tail() {
        let big = format!("start\n{}end\n", "\0".repeat(3 << 20));
        let mut value = serde_json::json!({ "diff": big, "n": 1 });
        assert!(bound_json(&mut value, MAX_EVENT_BYTES));
        assert!(json_size(&value) <= MAX_EVENT_BYTES);
        let kept = value["diff"].as_str().unwrap_or_default();
        assert!(
            kept.starts_with("start\n") && kept.ends_with("end\n"),
            "{kept:.80}"
        );
        assert!(kept.contains("bytes) elided …]"));
        let mut many = serde_json::json!({ "files": vec!["x".repeat(100); 50_000] });
        bound_json(&mut many, MAX_EVENT_BYTES);
        assert!(json_size(&many) <= MAX_EVENT_BYTES);
        let mut small = serde_json::json!({ "a": "b" });
        assert!(!bound_json(&mut small, MAX_EVENT_BYTES));
    }

    #[test]
    fn a_tasks_events_stay_within_their_total() {
        let mut budget = EventBudget::default();
        let mut spent = 0;
        for _ in 0..100 {
            let mut text = "x".repeat(2 << 20);
            let mut data = serde_json::json!({ "diff": "y".repeat(2 << 20) });
            budget.shape(&mut text, &mut data, false);
            spent += text.len() + json_size(&data);
        }
        assert!(spent <= MAX_TASK_EVENT_BYTES + 100 * 2048, "{spent}");
        assert!(budget.over());
        let mut text = "Finished: success".to_owned();
        let mut data = serde_json::json!({ "status": "success" });
        budget.shape(&mut text, &mut data, true);
        assert_eq!(data["status"], "success");
    }

    #[test]
    fn no_trailing_newline() {
        let text: String = (1..=10).map(|i| format!("{i}\n")).collect::<String>() + "end";
        let out = head_tail(&text, 1000, 4);
        assert_eq!(out, "1\n2\n[… 7 lines (14 bytes) elided …]\n10\nend");
    }
}
