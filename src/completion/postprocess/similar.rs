//! Whether the completed line repeats the next line of the document.

fn normalize_ws(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Whether the cursor line as completed equals the next non-blank line, or is
/// near-equal to it (edit distance ≤ 10 % of the longer, after collapsing
/// whitespace). When both start with the cursor line's prefix, only what follows
/// it is compared, so `foo(a, c);` above `foo(a, b);` is not a repeat.
///
/// In a run of alike lines (the line above is itself near-equal to the next
/// one: a table, a list of similar entries) near-equal is what the right
/// line looks like, so only an exact repeat counts there: `'Q'  # 0x51 -> Q`
/// between the `'P'` and `'R'` rows of a codec table is the answer, not an
/// echo.
pub(super) fn repeats_next_line(
    text: &str,
    prefix: &str,
    rest_suffix: &str,
    following: &str,
    preceding: &str,
) -> bool {
    let Some(next) = following.lines().find(|l| !l.trim().is_empty()) else {
        return false;
    };
    let next = normalize_ws(next);
    let in_a_run = preceding
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|above| similar(&normalize_ws(above), &next));
    let line = normalize_ws(&format!("{prefix}{text}{rest_suffix}"));
    let p = normalize_ws(prefix);
    let (a, b) = if !p.is_empty() && next.starts_with(&p) && line.starts_with(&p) {
        (line[p.len()..].trim(), next[p.len()..].trim())
    } else {
        (line.as_str(), next.as_str())
    };
    if in_a_run {
        a == b
    } else {
        similar(a, b)
    }
}

fn similar(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    const MAX: usize = 1000;
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let longest = a.len().max(b.len());
    if longest > MAX {
        return false;
    }
    let allowed = longest / 10;
    if a.len().abs_diff(b.len()) > allowed {
        return false;
    }
    edit_distance(&a, &b) <= allowed
}

fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0usize; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}
