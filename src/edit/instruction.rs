//! A selection without an instruction may carry one in a comment:
//! `# fettle: use a dict`, `// fettle: handle the empty case`.
use std::sync::OnceLock;

use regex::Regex;

/// The instruction of the first `fettle:` comment in `text`, and the
/// comment itself (from its opening marker to the end of the line).
pub fn from_comment(text: &str) -> Option<(String, String)> {
    static COMMENT: OnceLock<Option<Regex>> = OnceLock::new();
    let re = COMMENT
        .get_or_init(|| {
            Regex::new(r"(?m)(?:#|//|--|/\*|;|<!--)[ \t]*fettle:[ \t]*(\S[^\r\n]*?)[ \t]*(?:\*/|-->)?[ \t]*\r?$")
                .map_err(|err| tracing::error!("fettle: comment pattern: {err}"))
                .ok()
        })
        .as_ref()?;
    let found = re.captures(text)?;
    let whole = found.get(0)?.as_str().trim_end_matches(['\r', ' ', '\t']);
    Some((found.get(1)?.as_str().to_owned(), whole.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::from_comment;

    #[test]
    fn comments_of_several_languages() {
        let got = |t: &str| from_comment(t).map(|(i, _)| i);
        assert_eq!(
            got("x = 1\n    # fettle: use a dict\n").as_deref(),
            Some("use a dict")
        );
        assert_eq!(
            got("let a = 1; // fettle: rename a").as_deref(),
            Some("rename a")
        );
        assert_eq!(
            got("/* fettle: inline this */\n").as_deref(),
            Some("inline this")
        );
        assert_eq!(got("-- fettle: local it\r\n").as_deref(), Some("local it"));
        assert_eq!(got("# fettle:\nx"), None);
        assert_eq!(got("fettle: not a comment"), None);
        assert_eq!(
            from_comment("  # fettle: do it  \n")
                .map(|(_, c)| c)
                .as_deref(),
            Some("# fettle: do it")
        );
    }
}
