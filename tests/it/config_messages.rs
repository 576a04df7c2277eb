//! Configuration messages: errors, warnings and `fettle doctor`'s rendering,
//! driven by the fixtures in `tests/fixtures/config/{errors,warnings}`.
//! Snapshots live in `tests/fixtures/config/snapshots`.
// Tests: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fettle::config::{parse_toml, ConfigLayers, Source};
use proptest::prelude::*;
use serde_json::json;

/// The fixed source fixtures are loaded as, so messages do not depend on the checkout.
fn workspace() -> Source {
    Source::WorkspaceFile(PathBuf::from("/p/fettle.toml"))
}

fn fixture_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(kind)
}

/// Each fixture of `kind`, by file stem, resolved as the workspace file.
fn resolve_fixtures(kind: &str) -> BTreeMap<String, Result<fettle::config::Resolved, Vec<String>>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(fixture_dir(kind)).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut layers = ConfigLayers::default();
        layers.set(
            workspace(),
            parse_toml(&text, Path::new("/p/fettle.toml")).unwrap(),
        );
        // The messages, not trust, are under test here (config_trust.rs).
        layers.trust_layer(&workspace());
        let result = layers
            .resolve_all()
            .map_err(|errs| errs.iter().map(ToString::to_string).collect());
        out.insert(name, result);
    }
    assert!(!out.is_empty());
    out
}

fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../fixtures/config/snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings
}

#[test]
fn error_messages() {
    let messages: BTreeMap<String, Vec<String>> = resolve_fixtures("errors")
        .into_iter()
        .map(|(name, result)| match result {
            Err(errors) => (name, errors),
            Ok(_) => panic!("fixture errors/{name}.toml resolved without an error"),
        })
        .collect();
    // The texts the contract spells out, checked literally as well as in the snapshot.
    let first = |name: &str| messages[name][0].clone();
    assert!(first("unknown_provider").starts_with(r#"models.fast.provider: unknown provider "opnai"; expected one of local, openai, anthropic, ollama, mistral, llamacpp"#));
    assert!(first("wrong_type_integer").starts_with(
        r#"completion.max_prompt_tokens: expected an integer, found a string "lots""#
    ));
    assert!(first("unknown_model")
        .starts_with(r#"completion.model: unknown model "fats" (defined: fast, local, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)"#));
    for secret in ["sk-proj-0123456789abcdefABCDEF", "hunter2", "hunter3"] {
        assert!(
            messages.values().flatten().all(|m| !m.contains(secret)),
            "{secret} was echoed"
        );
    }
    snapshot_settings().bind(|| insta::assert_json_snapshot!("error_messages", messages));
}

#[test]
fn warning_messages() {
    let warnings: BTreeMap<String, Vec<String>> = resolve_fixtures("warnings")
        .into_iter()
        .map(|(name, result)| match result {
            Ok(resolved) => {
                assert!(
                    !resolved.warnings.is_empty(),
                    "fixture warnings/{name}.toml gave no warning"
                );
                (name, resolved.warnings)
            }
            Err(e) => panic!("fixture warnings/{name}.toml failed: {e:?}"),
        })
        .collect();
    assert_eq!(
        warnings["typo_in_key"],
        ["completion.debouce_ms: unknown key; did you mean `debounce_ms`? (from workspace file /p/fettle.toml)"]
    );
    assert!(
        warnings.values().flatten().all(|m| !m.contains("sk-proj")),
        "a pasted key was echoed"
    );
    snapshot_settings().bind(|| insta::assert_json_snapshot!("warning_messages", warnings));
}

#[test]
fn unknown_keys_are_reported_with_full_paths_from_json_sources_too() {
    let mut layers = ConfigLayers::default();
    layers.set(
        Source::WorkspaceConfiguration,
        json!({"models": {"fast": {"provider": "ollama", "model": "m", "extra_body": {"anything": {"goes": 1}}, "timeout": 5}},
               "agent": {"comands": "auto"}, "zzz": 1}),
    );
    let resolved = layers.resolve().unwrap();
    let mut warnings = resolved.warnings.clone();
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "agent.comands: unknown key; did you mean `commands`? (from workspace/configuration)",
            "models.fast.timeout: unknown key; did you mean `timeout_ms`? (from workspace/configuration)",
            "zzz: unknown key (from workspace/configuration)",
        ]
    );
}

#[test]
fn the_first_error_is_what_resolve_returns() {
    let mut layers = ConfigLayers::default();
    layers.set(
        Source::InitializationOptions,
        json!({"models": {"fast": {"provider": "opnai"}}}),
    );
    let err = layers.resolve().unwrap_err();
    assert_eq!(err.path, "models.fast.provider");
    assert_eq!(
        err.message,
        r#"unknown provider "opnai"; expected one of local, openai, anthropic, ollama, mistral, llamacpp; did you mean "openai"? (from initializationOptions)"#
    );
}

#[test]
fn render_lists_every_leaf_with_its_source_and_hides_secrets() {
    let mut layers = ConfigLayers::default();
    layers.set(
        Source::UserFile(PathBuf::from("/x/config.toml")),
        json!({"models": {
            "fast": {"provider": "openai", "base_url": "https://me:pw@example.com/v1?key=q", "model": "qwen2.5-coder-1.5b",
                     "api_key_env": "OPENAI_API_KEY", "extra_body": {"top_p": 0.9, "api_key": "sk-hidden", "stop": ["\n"]}},
            "claude": {"provider": "anthropic", "model": "claude-sonnet-4-5", "api_key_env": "ANTHROPIC_API_KEY"}},
            "completion": {"model": "fast"}}),
    );
    layers.set(
        workspace(),
        json!({"index": {"exclude": ["target/**", "*.min.js"]}, "agent": {"commands": "never"}}),
    );
    layers.set(
        Source::WorkspaceConfiguration,
        json!({"completion": {"debounce_ms": 25}}),
    );
    let resolved = layers.resolve().unwrap();
    let text = resolved.render_with(&|name| name == "OPENAI_API_KEY");
    assert!(
        text.contains(r#"api_key_env = "OPENAI_API_KEY""#)
            && text.contains("# user file /x/config.toml (set)")
    );
    assert!(text.contains("# user file /x/config.toml (not set)"));
    for secret in ["sk-hidden", ":pw@", "key=q"] {
        assert!(!text.contains(secret), "{secret} shown in:\n{text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted, "sorted by key");
    assert_eq!(lines.len(), resolved.provenance.len(), "one line per leaf");
    let comment_column: Vec<usize> = lines.iter().filter_map(|l| l.find("  # ")).collect();
    assert!(
        comment_column
            .windows(2)
            .all(|w| w[0] == w[1] || w[0] > 60 || w[1] > 60),
        "aligned:\n{text}"
    );
    snapshot_settings().bind(|| insta::assert_snapshot!("render", text));
}

/// Every TOML and JSON example in the user documentation resolves cleanly.
#[test]
fn documentation_examples_resolve() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
    )
    .unwrap();
    let mut checked = 0;
    for (i, block) in doc.split("```").enumerate().filter(|(i, _)| i % 2 == 1) {
        let (lang, body) = block.split_once('\n').unwrap();
        let value = match lang.trim() {
            "toml" => parse_toml(body, Path::new("docs/configuration.md")).unwrap(),
            "json" => serde_json::from_str(body).unwrap(),
            _ => continue,
        };
        let mut layers = ConfigLayers::default();
        layers.set(workspace(), value);
        let resolved = layers
            .resolve()
            .unwrap_or_else(|e| panic!("example {i}: {e}"));
        assert_eq!(resolved.warnings, Vec::<String>::new(), "example {i}");
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} examples found");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever a pasted key looks like, it is refused and never repeated.
    #[test]
    fn a_key_in_api_key_env_is_never_echoed(
        key in prop_oneof!["sk-[A-Za-z0-9_-]{8,40}", "sk_live_[A-Za-z0-9]{8,30}", "[a-z0-9]{16,30}[A-Z][0-9]{4,10}", "[A-Za-z0-9]{4,10}[-./+=][A-Za-z0-9]{4,30}"]
    ) {
        let mut layers = ConfigLayers::default();
        layers.set(Source::InitializationOptions, json!({"models": {"m": {"provider": "openai", "model": "x", "api_key_env": key}}}));
        let err = layers.resolve().unwrap_err();
        prop_assert_eq!(err.path.as_str(), "models.m.api_key_env");
        prop_assert!(!err.to_string().contains(&key));
    }

    /// Arbitrary JSON in any section gives a result or an error, never a panic.
    #[test]
    fn arbitrary_json_never_panics(section in "[a-z_]{1,12}", key in "[a-z_]{1,12}", value in arb_json()) {
        for section in [section.as_str(), "completion", "agent", "index", "log"] {
            let mut layers = ConfigLayers::default();
            layers.set(Source::WorkspaceConfiguration, json!({ section: { key.as_str(): value.clone() } }));
            let _ = layers.resolve_all();
            layers.set(Source::WorkspaceConfiguration, json!({"models": { section: value.clone() }}));
            let _ = layers.resolve_all();
        }
    }
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e6f64..1e6).prop_map(serde_json::Value::from),
        "[a-z ]{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
