//! What the model sees for a rewrite: the file's path and language, its
//! header, definitions of the identifiers the selection uses, the code
//! around the selection with a marker where the selection sits, the
//! problems to fix, the selection itself, and the instruction last. Packed
//! into a token budget: the selection, problems and instruction always; then
//! the surrounding code (nearest lines first), the header, the definitions.
use crate::model::Message;

/// Stands for the selection inside the surrounding code.
pub const MARKER: &str = "<<<SELECTED CODE>>>";

const SYSTEM: &str = "You are Fettle, an expert programmer editing code in the user's editor. \
You rewrite the selected code as instructed: change only what the instruction asks, keep the \
code's style and indentation, and reply with the complete new version of the selected code in \
one fenced code block, with no explanation.";

/// Everything the prompt may say; the budget decides what it does say.
pub struct PromptParts<'a> {
    /// The file, relative to the workspace root when it is inside one.
    pub path: &'a str,
    /// Language name for the reader (`Python`) and the fence tag (`python`).
    pub language: Option<(&'a str, &'a str)>,
    pub header: Option<String>,
    /// One line each: `path:line: signature`.
    pub definitions: Vec<String>,
    /// The code around the selection: before it and after it, each in
    /// whole lines (the marker goes between).
    pub around: Option<(String, String)>,
    /// One line each: `line N, severity [source code]: message`.
    pub problems: Vec<String>,
    pub selection: &'a str,
    /// 1-based lines of the selection.
    pub lines: (usize, usize),
    pub instruction: &'a str,
    /// The instruction came from a `fettle:` comment in the selection.
    pub from_comment: bool,
}

/// A prompt too big for the budget even at its smallest.
#[derive(Debug)]
pub struct TooLarge {
    pub needed: usize,
    pub budget: usize,
}

/// The messages for `parts`, within `budget` tokens (by `count`).
pub fn messages(
    parts: &PromptParts<'_>,
    budget: usize,
    count: &dyn Fn(&str) -> usize,
) -> Result<Vec<Message>, TooLarge> {
    let fence = parts.language.map(|(_, tag)| tag).unwrap_or("");
    let core = core_text(parts, fence);
    let needed = count(SYSTEM) + count(&core);
    if needed > budget {
        return Err(TooLarge { needed, budget });
    }
    let mut left = budget - needed;
    let take = |left: &mut usize, text: String| -> Option<String> {
        let n = count(&text);
        (n <= *left).then(|| {
            *left -= n;
            text
        })
    };
    let around = parts.around.as_ref().and_then(|(before, after)| {
        let (before, after) = fit_around(before, after, left, count);
        take(
            &mut left,
            format!(
                "The selected code sits here in the file ({MARKER} stands for it):\n```{fence}\n{before}{MARKER}\n{after}```\n\n"
            ),
        )
    });
    let header = parts.header.as_ref().and_then(|h| {
        take(
            &mut left,
            format!("The file begins with:\n```{fence}\n{h}```\n\n"),
        )
    });
    let mut definitions = String::new();
    for d in &parts.definitions {
        if let Some(line) = take(&mut left, format!("- {d}\n")) {
            definitions.push_str(&line);
        }
    }
    let mut user = String::new();
    let language = parts
        .language
        .map(|(name, _)| format!(" ({name})"))
        .unwrap_or_default();
    user.push_str(&format!("File: {}{language}\n\n", parts.path));
    if let Some(header) = header {
        user.push_str(&header);
    }
    if !definitions.is_empty() {
        user.push_str("Definitions the selected code uses, from elsewhere in the workspace:\n");
        user.push_str(&definitions);
        user.push('\n');
    }
    if let Some(around) = around {
        user.push_str(&around);
    }
    user.push_str(&core);
    Ok(vec![Message::system(SYSTEM), Message::user(user)])
}

/// The parts that are always sent: problems, the selection, the instruction.
fn core_text(parts: &PromptParts<'_>, fence: &str) -> String {
    let mut text = String::new();
    if !parts.problems.is_empty() {
        text.push_str("Problems reported in this code:\n");
        for p in &parts.problems {
            text.push_str(&format!("- {p}\n"));
        }
        text.push('\n');
    }
    let (first, last) = parts.lines;
    let lines = if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    };
    let selection = parts.selection;
    let newline = if selection.ends_with('\n') { "" } else { "\n" };
    text.push_str(&format!(
        "Selected code ({lines}):\n```{fence}\n{selection}{newline}```\n\nInstruction: {}\n",
        parts.instruction
    ));
    if parts.from_comment {
        text.push_str("(The instruction is the `fettle:` comment in the selected code: remove that comment.)\n");
    }
    text.push_str(&format!(
        "\nReply with the complete new version of the selected code only, in one ```{fence} fenced code block. Do not repeat code from outside the selection."
    ));
    text
}

/// The lines of `before` and `after` nearest the selection that fit in
/// `budget` tokens, with `…` where lines were left out.
fn fit_around(
    before: &str,
    after: &str,
    budget: usize,
    count: &dyn Fn(&str) -> usize,
) -> (String, String) {
    let before: Vec<&str> = before.split_inclusive('\n').collect();
    let after: Vec<&str> = after.split_inclusive('\n').collect();
    // Fixed cost of the wrapping text, with room for the elision marks.
    let mut left = budget.saturating_sub(40);
    let (mut b, mut a) = (0usize, 0usize);
    loop {
        let mut grew = false;
        for side in [0, 1] {
            let line = if side == 0 {
                before.len().checked_sub(b + 1).map(|i| before[i])
            } else {
                after.get(a).copied()
            };
            let Some(line) = line else { continue };
            let n = count(line);
            if n > left {
                continue;
            }
            left -= n;
            grew = true;
            if side == 0 {
                b += 1;
            } else {
                a += 1;
            }
        }
        if !grew {
            break;
        }
    }
    let mut before_text = String::new();
    if b < before.len() {
        before_text.push_str("…\n");
    }
    before_text.extend(before[before.len() - b..].iter().copied());
    let mut after_text: String = after[..a].concat();
    if a < after.len() {
        if !after_text.is_empty() && !after_text.ends_with('\n') {
            after_text.push('\n');
        }
        after_text.push_str("…\n");
    }
    if !after_text.is_empty() && !after_text.ends_with('\n') {
        after_text.push('\n');
    }
    (before_text, after_text)
}
