//! Checks that types alone cannot express: ranges, cross-references between
//! sections, URL and variable-name shapes.
use super::schema::{Config, ModelConfig, Provider};
use super::text::{did_you_mean, keys, Seg};

pub(crate) struct Finding {
    pub segs: Vec<Seg>,
    pub message: String,
}

#[derive(Default)]
pub(crate) struct Findings {
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

impl Findings {
    fn error(&mut self, path: &[&str], message: impl Into<String>) {
        self.errors.push(Finding {
            segs: keys(path),
            message: message.into(),
        });
    }
    fn warn(&mut self, path: &[&str], message: impl Into<String>) {
        self.warnings.push(Finding {
            segs: keys(path),
            message: message.into(),
        });
    }
    fn positive(&mut self, path: &[&str], value: u64) {
        if value == 0 {
            self.error(path, "must be greater than 0");
        }
    }
}

/// `is_default(path)` tells whether no layer above the built-in defaults set
/// `path`, so leftovers of the built-in `local` model are not reported.
pub(crate) fn validate(config: &Config, is_default: &dyn Fn(&[Seg]) -> bool) -> Findings {
    let mut f = Findings::default();
    for (name, model) in &config.models {
        check_model(&mut f, name, model, is_default);
    }
    for (section, name) in [
        ("completion", &config.completion.model),
        ("edit", &config.edit.model),
        ("agent", &config.agent.model),
    ] {
        if !config.models.contains_key(name) {
            let defined: Vec<&str> = config.models.keys().map(String::as_str).collect();
            let hint = did_you_mean(name, defined.iter().copied())
                .map(|m| format!("; did you mean \"{m}\"?"))
                .unwrap_or_default();
            f.error(
                &[section, "model"],
                format!(
                    "unknown model {name:?} (defined: {}){hint}",
                    defined.join(", ")
                ),
            );
        }
    }
    let reviewer = &config.agent.review_model;
    if !reviewer.is_empty() && !config.models.contains_key(reviewer) {
        let defined: Vec<&str> = config.models.keys().map(String::as_str).collect();
        f.error(
            &["agent", "review_model"],
            format!(
                "unknown model {reviewer:?} (defined: {}; empty: the agent's own model)",
                defined.join(", ")
            ),
        );
    }
    f.positive(&["index", "max_file_bytes"], config.index.max_file_bytes);
    for (i, pattern) in config.index.exclude.iter().enumerate() {
        if let Err(message) = check_glob(pattern) {
            let segs = vec![
                Seg::Key("index".into()),
                Seg::Key("exclude".into()),
                Seg::Index(i),
            ];
            f.errors.push(Finding { segs, message });
        }
    }
    f.positive(
        &["completion", "max_prompt_tokens"],
        config.completion.max_prompt_tokens.into(),
    );
    f.positive(
        &["edit", "max_prompt_tokens"],
        config.edit.max_prompt_tokens.into(),
    );
    for (i, action) in config.edit.actions.iter().enumerate() {
        for (field, value) in [
            ("title", &action.title),
            ("instruction", &action.instruction),
        ] {
            if value.trim().is_empty() {
                let segs = vec![
                    Seg::Key("edit".into()),
                    Seg::Key("actions".into()),
                    Seg::Index(i),
                    Seg::Key(field.into()),
                ];
                f.errors.push(Finding {
                    segs,
                    message: "must not be empty".to_owned(),
                });
            }
        }
    }
    let agent = &config.agent;
    f.positive(&["agent", "max_iterations"], agent.max_iterations.into());
    f.positive(&["agent", "candidates"], agent.candidates.into());
    if agent.candidates > crate::config::MAX_CANDIDATES {
        f.error(
            &["agent", "candidates"],
            format!("must be at most {}", crate::config::MAX_CANDIDATES),
        );
    }
    f.positive(&["agent", "max_tool_calls"], agent.max_tool_calls.into());
    f.positive(&["agent", "max_tokens"], agent.max_tokens);
    f.positive(&["agent", "timeout_s"], agent.timeout_s);
    f.positive(&["agent", "test_timeout_s"], agent.test_timeout_s);
    f.positive(&["agent", "command_timeout_s"], agent.command_timeout_s);
    f.positive(&["check", "timeout_s"], config.check.timeout_s);
    check_languages(&mut f, "commands", config.check.commands.keys());
    check_languages(&mut f, "formats", config.check.formats.keys());
    check_log_level(&mut f, &config.log.level);
    f
}

/// `[check.commands]` and `[check.formats]` are keyed by language.
fn check_languages<'a>(f: &mut Findings, table: &str, keys: impl Iterator<Item = &'a String>) {
    use super::check::CHECK_LANGUAGES;
    for key in keys {
        if !CHECK_LANGUAGES.contains(&key.as_str()) {
            let hint = did_you_mean(key, CHECK_LANGUAGES.iter().copied())
                .map(|m| format!("; did you mean \"{m}\"?"))
                .unwrap_or_default();
            f.error(
                &["check", table, key],
                format!(
                    "unknown language {key:?}; expected one of {}{hint}",
                    CHECK_LANGUAGES.join(", ")
                ),
            );
        }
    }
}

fn check_model(f: &mut Findings, name: &str, m: &ModelConfig, is_default: &dyn Fn(&[Seg]) -> bool) {
    let at = |key: &'static str| -> [&str; 3] { ["models", name, key] };
    let user_set = |key: &'static str| !is_default(&keys(&at(key)));
    let provider = m.provider;
    if provider == Provider::Local {
        if m.path.as_deref().is_none_or(|p| p.trim().is_empty()) {
            f.error(
                &at("path"),
                "required for provider \"local\" (the .gguf weights file)",
            );
        }
        for key in ["base_url", "model", "api_key_env"] {
            let set = match key {
                "base_url" => m.base_url.is_some(),
                "model" => m.model.is_some(),
                _ => m.api_key_env.is_some(),
            };
            if set && user_set(key) {
                f.warn(&at(key), "ignored: provider \"local\" runs in-process");
            }
        }
    } else {
        if let Some(url) = &m.base_url {
            if let Err(message) = check_url(url) {
                f.error(&at("base_url"), message);
            }
        }
        if provider.requires_model_name() && m.model.as_deref().is_none_or(|s| s.trim().is_empty())
        {
            f.error(
                &at("model"),
                format!("required for provider \"{provider}\" (the model name the server expects)"),
            );
        }
        if m.path.is_some() && user_set("path") {
            f.warn(&at("path"), format!("ignored: only provider \"local\" reads a weights file, this model uses \"{provider}\""));
        }
    }
    if let Some(var) = m.api_key_env.as_deref().filter(|v| !v.is_empty()) {
        if !is_variable_name(var) {
            f.error(
                &at("api_key_env"),
                "must be the NAME of an environment variable that holds the key (letters, digits and _, \
                 e.g. \"OPENAI_API_KEY\"), not the key itself; put the key in that variable (value not shown)",
            );
        }
    }
    if !(m.temperature.is_finite() && (0.0..=2.0).contains(&m.temperature)) {
        f.error(
            &at("temperature"),
            format!("must be between 0 and 2, found {}", m.temperature),
        );
    }
    f.positive(&at("max_tokens"), m.max_tokens.into());
    f.positive(&at("timeout_ms"), m.timeout_ms);
    f.positive(&at("connect_timeout_ms"), m.connect_timeout_ms);
    f.positive(&at("total_timeout_ms"), m.total_timeout_ms);
    if m.provider == Provider::Local && m.context_tokens < 256 {
        f.error(
            &at("context_tokens"),
            format!("must be at least 256, found {}", m.context_tokens),
        );
    }
}

/// Checks an `index.exclude` pattern the way the index will use it: as a
/// gitignore-style glob in an override matcher.
fn check_glob(pattern: &str) -> Result<(), String> {
    if pattern.trim().is_empty() {
        return Err("empty pattern".to_string());
    }
    let mut builder = ignore::overrides::OverrideBuilder::new("/");
    // Checked without the index's `!` so the message quotes the user's text.
    match builder.add(pattern) {
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether `s` looks like an environment variable's name rather than a
/// secret. Keys contain `-` (`sk-...`), start with `sk_`, or are long
/// mixed-case alphanumeric runs; names are identifiers, usually UPPER_SNAKE.
pub(crate) fn is_variable_name(s: &str) -> bool {
    let mut chars = s.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    let key_prefix = s.starts_with("sk_") || s.starts_with("sk-");
    let random_looking = s.len() >= 20
        && !s.contains('_')
        && s.chars().any(|c| c.is_ascii_lowercase())
        && s.chars().any(|c| c.is_ascii_digit());
    identifier && !key_prefix && !random_looking
}

/// A light http(s) URL check: scheme, a host, an optional numeric port, no spaces.
fn check_url(url: &str) -> Result<(), String> {
    let bad = || format!("{:?} is not an http(s) URL", redact_url(url));
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(bad)?;
    if url.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = match host_port.strip_prefix('[') {
        // [IPv6]:port
        Some(v6) => match v6.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Err(bad()),
        },
        None => match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    if host.is_empty() || port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(bad());
    }
    Ok(())
}

/// The URL without user info or query, either of which may carry a secret.
pub(crate) fn redact_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let after = &url[scheme_end + 3..];
    let authority_end = after.find('/').unwrap_or(after.len());
    match after[..authority_end].rfind('@') {
        Some(at) => format!("{}://***@{}", &url[..scheme_end], &after[at + 1..]),
        None => url.to_string(),
    }
}

fn check_log_level(f: &mut Findings, level: &str) {
    if level.trim().is_empty() {
        f.error(
            &["log", "level"],
            "must not be empty (e.g. \"info\" or \"fettle=debug\")",
        );
        return;
    }
    if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(level) {
        f.error(
            &["log", "level"],
            format!("not a valid filter directive: {e}"),
        );
        return;
    }
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    // A bare word that is not a level parses as a target name, which is
    // almost never what was meant (`level = "verbose"`).
    for directive in level.split(',').map(str::trim).filter(|d| !d.contains('=')) {
        if !LEVELS.contains(&directive.to_ascii_lowercase().as_str()) && !directive.contains("::") {
            f.warn(
                &["log", "level"],
                format!("{directive:?} is not a level (off, error, warn, info, debug, trace), so it is read as a target name"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names_versus_keys() {
        for ok in [
            "OPENAI_API_KEY",
            "_X",
            "my_key_2",
            "MISTRAL_API_KEY",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        ] {
            assert!(is_variable_name(ok), "{ok}");
        }
        for bad in [
            "sk-proj-abc",
            "sk_live_abc",
            "OPENAI API KEY",
            "1ABC",
            "",
            "aB3dE5fG7hJ9kL1mN3pQ5rS7",
        ] {
            assert!(!is_variable_name(bad), "{bad}");
        }
    }

    #[test]
    fn urls() {
        for ok in [
            "http://127.0.0.1:8000/v1",
            "https://api.openai.com/v1",
            "http://[::1]:8080",
            "https://h",
        ] {
            assert_eq!(check_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "127.0.0.1:8000",
            "ftp://x",
            "http://",
            "http://h:port",
            "http://a b",
            "https://:80",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        assert_eq!(
            check_url("ftp://user:pw@host/x?key=secret"),
            Err("\"ftp://***@host/x\" is not an http(s) URL".to_string())
        );
    }
}
