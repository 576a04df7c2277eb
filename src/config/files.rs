//! Finding and reading `config.toml` / `fettle.toml`, and turning TOML into
//! the JSON shape every other source already has.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::text::{join_path, Seg};
use super::ConfigError;

/// `$XDG_CONFIG_HOME/fettle/config.toml`, else `$HOME/.config/fettle/config.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    user_config_path_from(
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`user_config_path`] without reading the environment. A relative
/// `XDG_CONFIG_HOME` is ignored, as the XDG spec asks.
pub(crate) fn user_config_path_from(
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let xdg = xdg.map(PathBuf::from).filter(|p| p.is_absolute());
    let base = xdg.or_else(|| {
        home.filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".config"))
    })?;
    Some(base.join("fettle").join("config.toml"))
}

pub fn workspace_config_path(root: &Path) -> PathBuf {
    root.join("fettle.toml")
}

/// Reads a TOML configuration file as JSON. `Ok(None)` when it does not exist.
pub fn read_toml_file(path: &Path) -> Result<Option<Value>, ConfigError> {
    // Regular files only, capped: a cloned repository's `fettle.toml` may be
    // a FIFO or a symlink to `/dev/zero`.
    match crate::fsread::read_optional_to_string(path, crate::fsread::CONFIG_MAX_BYTES) {
        Ok(Some(text)) => parse_toml(&text, path).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(read_error(&e)),
    }
}

/// A refused or failed read as a configuration error naming the file.
pub(crate) fn read_error(e: &crate::fsread::ReadError) -> ConfigError {
    ConfigError {
        path: e.path().display().to_string(),
        message: e.reason(),
    }
}

/// Parses TOML text; a syntax error's path is `file:line:column`.
pub fn parse_toml(text: &str, path: &Path) -> Result<Value, ConfigError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let at = match e.span() {
            Some(span) => {
                let (line, col) = line_col(text, span.start);
                format!("{}:{line}:{col}", path.display())
            }
            None => path.display().to_string(),
        };
        ConfigError {
            path: at,
            message: format!("invalid TOML: {}", e.message().trim_end()),
        }
    })?;
    let mut segs = Vec::new();
    table_to_json(&table, &mut segs).map_err(|(segs, message)| ConfigError {
        path: format!("{}: {}", path.display(), join_path(&segs)),
        message,
    })
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

type ConvertError = (Vec<Seg>, String);

fn table_to_json(table: &toml::Table, segs: &mut Vec<Seg>) -> Result<Value, ConvertError> {
    let mut map = serde_json::Map::new();
    for (key, value) in table {
        segs.push(Seg::Key(key.clone()));
        map.insert(key.clone(), toml_to_json(value, segs)?);
        segs.pop();
    }
    Ok(Value::Object(map))
}

fn toml_to_json(value: &toml::Value, segs: &mut Vec<Seg>) -> Result<Value, ConvertError> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => Value::Number(n),
            // JSON has no NaN or infinity, and no key accepts them anyway.
            None => return Err((segs.clone(), format!("{f} is not a usable number"))),
        },
        toml::Value::Boolean(b) => Value::Bool(*b),
        // No key takes a date; keep its text so the type error can show it.
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                segs.push(Seg::Index(i));
                out.push(toml_to_json(item, segs)?);
                segs.pop();
            }
            Value::Array(out)
        }
        toml::Value::Table(t) => table_to_json(t, segs)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_path_prefers_absolute_xdg() {
        let p = user_config_path_from(Some("/xdg".into()), Some("/home/u".into()));
        assert_eq!(p, Some(PathBuf::from("/xdg/fettle/config.toml")));
        let p = user_config_path_from(Some("relative".into()), Some("/home/u".into()));
        assert_eq!(p, Some(PathBuf::from("/home/u/.config/fettle/config.toml")));
        let p = user_config_path_from(Some("".into()), Some("/home/u".into()));
        assert_eq!(p, Some(PathBuf::from("/home/u/.config/fettle/config.toml")));
        assert_eq!(user_config_path_from(None, None), None);
        assert_eq!(user_config_path_from(None, Some("".into())), None);
    }

    #[test]
    fn converts_toml_values() {
        let v = parse_toml(
            "a = 1\nb = [1.5, true]\n[c]\nd = 1979-05-27\n",
            Path::new("x.toml"),
        );
        assert_eq!(
            v,
            Ok(serde_json::json!({"a": 1, "b": [1.5, true], "c": {"d": "1979-05-27"}}))
        );
    }

    #[test]
    fn rejects_nan() {
        let err = parse_toml("[models.m]\ntemperature = nan\n", Path::new("x.toml"));
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err("x.toml: models.m.temperature: NaN is not a usable number".to_string())
        );
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let err = parse_toml("[completion]\nenabled = \n", Path::new("/p/fettle.toml"));
        let err = err.err().map(|e| e.path);
        assert_eq!(err.as_deref(), Some("/p/fettle.toml:2:11"));
    }
}
