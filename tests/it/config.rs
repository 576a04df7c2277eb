//! Configuration: defaults, layering, provenance, files.
//! Message texts are covered, data-driven, in `config_messages.rs`.
// Tests: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::{Path, PathBuf};

use fettle::config::{
    CommandPolicy, Config, ConfigLayers, FimTemplate, ModelConfig, Multiline, Provider, Resolved,
    Source, BUILTIN_MODEL,
};
use serde_json::json;

fn user() -> Source {
    Source::UserFile(PathBuf::from("/home/u/.config/fettle/config.toml"))
}
fn workspace() -> Source {
    Source::WorkspaceFile(PathBuf::from("/p/fettle.toml"))
}

fn fixture(path: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(path);
    let text = std::fs::read_to_string(&path).unwrap();
    fettle::config::parse_toml(&text, &path).unwrap()
}

#[test]
fn defaults_round_trip() {
    let config = Config::default();
    let json = serde_json::to_value(&config).unwrap();
    assert_eq!(serde_json::from_value::<Config>(json).unwrap(), config);
    let toml_text = toml::to_string(&config).unwrap();
    assert_eq!(toml::from_str::<Config>(&toml_text).unwrap(), config);
    // An empty object is every default too.
    assert_eq!(serde_json::from_value::<Config>(json!({})).unwrap(), config);

    let resolved = ConfigLayers::default().resolve().unwrap();
    assert_eq!(resolved.config, config);
    assert_eq!(Resolved::default().provenance, resolved.provenance);
    assert!(resolved.warnings.is_empty());
    assert!(resolved.provenance.values().all(|s| *s == Source::Default));
    assert_eq!(
        resolved.provenance.len(),
        91,
        "{:#?}",
        resolved.provenance.keys()
    );
}

#[test]
fn default_values_match_the_contract() {
    let c = Config::default();
    assert!(c.index.enabled);
    assert_eq!(
        (c.index.max_file_bytes, c.index.exclude.len()),
        (1_048_576, 0)
    );
    assert!(c.diagnostics.enabled);
    assert_eq!(c.diagnostics.debounce_ms, 150);
    assert_eq!(c.log.level, "warn");
    let local = &c.models[BUILTIN_MODEL];
    assert_eq!(local.provider, Provider::Local);
    assert_eq!(
        local.path.as_deref(),
        Some("~/.cache/fettle/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    );
    assert_eq!(local.fim_template, FimTemplate::Auto);
    assert_eq!(
        (local.max_tokens, local.temperature, local.timeout_ms),
        (128, 0.2, 5000)
    );
    assert!(local.extra_body.is_empty() && local.base_url.is_none() && local.api_key_env.is_none());
    assert!(c.completion.enabled);
    assert_eq!(c.completion.model, "local");
    assert_eq!(
        (c.completion.debounce_ms, c.completion.max_prompt_tokens),
        (0, 1024)
    );
    assert_eq!(c.completion.multiline, Multiline::Auto);
    assert_eq!(c.edit.model, "local");
    let a = &c.agent;
    assert_eq!((a.model.as_str(), a.test_command.as_str()), ("local", ""));
    assert_eq!(
        (
            a.max_iterations,
            a.max_tool_calls,
            a.max_tokens,
            a.timeout_s
        ),
        (8, 60, 200_000, 900)
    );
    assert_eq!(a.commands, CommandPolicy::Ask);
}

#[test]
fn contract_example_resolves_without_warnings() {
    let mut layers = ConfigLayers::default();
    // The user's file: from an untrusted workspace file the keyed model's
    // `base_url` and `api_key_env` would be ignored (config_trust.rs).
    layers.set(user(), fixture("valid/contract.toml"));
    let resolved = layers.resolve().unwrap();
    assert_eq!(resolved.warnings, Vec::<String>::new());
    let fast = &resolved.config.models["fast"];
    assert_eq!(fast.provider, Provider::OpenAi);
    assert_eq!(fast.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
    assert_eq!(fast.model.as_deref(), Some("qwen2.5-coder-1.5b"));
    assert_eq!(fast.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(
        serde_json::Value::Object(fast.extra_body.clone()),
        json!({"top_p": 0.9, "stop": ["\n\n"]})
    );
    // Apart from the added model, the example restates the defaults.
    let mut expected = Config::default();
    expected.models.insert("fast".into(), fast.clone());
    assert_eq!(resolved.config, expected);
}

#[test]
fn every_provider_example_resolves_with_default_base_urls() {
    let mut layers = ConfigLayers::default();
    layers.set(workspace(), fixture("valid/providers.toml"));
    let resolved = layers.resolve().unwrap();
    assert_eq!(resolved.warnings, Vec::<String>::new());
    let url = |name: &str| resolved.config.models[name].base_url.clone();
    assert_eq!(url("gpt").as_deref(), Some("https://api.openai.com/v1"));
    assert_eq!(url("claude").as_deref(), Some("https://api.anthropic.com"));
    assert_eq!(url("ollama").as_deref(), Some("http://127.0.0.1:11434"));
    assert_eq!(
        url("codestral").as_deref(),
        Some("https://codestral.mistral.ai/v1")
    );
    assert_eq!(url("llamacpp").as_deref(), Some("http://127.0.0.1:8080"));
    assert_eq!(url("tiny"), None);
    assert_eq!(
        resolved.config.completion_model().map(|m| m.provider),
        Some(Provider::Ollama)
    );
    assert_eq!(
        resolved.config.edit_model().map(|m| m.provider),
        Some(Provider::Mistral)
    );
    assert_eq!(
        resolved.config.agent_model().map(|m| m.provider),
        Some(Provider::Anthropic)
    );
    // A filled-in default is still the default's doing.
    assert_eq!(resolved.provenance["models.gpt.base_url"], Source::Default);
    assert_eq!(resolved.provenance["models.llamacpp.base_url"], workspace());
}

/// Five sources, each setting some keys and overriding some below it.
fn five_layers() -> ConfigLayers {
    let mut layers = ConfigLayers::default();
    // Set out of order on purpose: priority comes from the source, not from the call order.
    layers.set(
        Source::WorkspaceConfiguration,
        json!({"completion": {"debounce_ms": 40}, "models": {"fast": {"extra_body": {"b": 2}}}}),
    );
    layers.set(
        user(),
        json!({
            "models": {"fast": {"provider": "openai", "base_url": "http://u:1/v1", "model": "u-model", "temperature": 0.5}},
            "completion": {"model": "fast", "debounce_ms": 10, "max_prompt_tokens": 111},
            "index": {"exclude": ["u"]},
            "log": {"level": "debug"},
        }),
    );
    layers.set(Source::InitializationOptions, json!({"completion": {"debounce_ms": 30}, "agent": {"timeout_s": 60}, "models": {"fast": {"extra_body": {"a": 1}}}}));
    layers.set(
        workspace(),
        json!({
            "models": {"fast": {"model": "w-model"}},
            "completion": {"debounce_ms": 20},
            "index": {"exclude": ["w1", "w2"]},
            "agent": {"max_iterations": 3},
        }),
    );
    layers
}

#[test]
fn layers_merge_in_priority_order_with_provenance() {
    let resolved = five_layers().resolve().unwrap();
    let c = &resolved.config;
    assert_eq!(c.completion.debounce_ms, 40);
    assert_eq!(c.completion.max_prompt_tokens, 111);
    assert_eq!(c.completion.model, "fast");
    let fast = &c.models["fast"];
    assert_eq!(fast.model.as_deref(), Some("w-model"));
    assert_eq!(fast.base_url.as_deref(), Some("http://u:1/v1"));
    assert_eq!(fast.temperature, 0.5);
    // Objects merge key by key, even across sources...
    assert_eq!(
        serde_json::Value::Object(fast.extra_body.clone()),
        json!({"a": 1, "b": 2})
    );
    // ...arrays replace.
    assert_eq!(c.index.exclude, ["w1", "w2"]);
    assert_eq!(c.agent.max_iterations, 3);
    assert_eq!(c.agent.timeout_s, 60);
    assert_eq!(c.log.level, "debug");
    assert!(
        c.models.contains_key(BUILTIN_MODEL),
        "the built-in model survives user models"
    );

    let p = &resolved.provenance;
    let expect = [
        ("completion.debounce_ms", Source::WorkspaceConfiguration),
        ("completion.max_prompt_tokens", user()),
        ("completion.model", user()),
        ("completion.multiline", Source::Default),
        ("models.fast.provider", user()),
        ("models.fast.model", workspace()),
        ("models.fast.base_url", user()),
        ("models.fast.temperature", user()),
        ("models.fast.max_tokens", Source::Default),
        ("models.fast.extra_body", Source::WorkspaceConfiguration),
        ("models.local.path", Source::Default),
        ("index.exclude", workspace()),
        ("agent.max_iterations", workspace()),
        ("agent.timeout_s", Source::InitializationOptions),
        ("log.level", user()),
        ("diagnostics.debounce_ms", Source::Default),
    ];
    for (key, source) in expect {
        assert_eq!(p.get(key), Some(&source), "{key}");
    }
    // Unset optional keys are not leaves.
    assert!(!p.contains_key("models.local.base_url") && !p.contains_key("models.fast.api_key_env"));
}

#[test]
fn replacing_a_layer_changes_the_result() {
    let mut layers = five_layers();
    layers.set(
        Source::WorkspaceConfiguration,
        json!({"completion": {"debounce_ms": 99}}),
    );
    let resolved = layers.resolve().unwrap();
    assert_eq!(resolved.config.completion.debounce_ms, 99);
    assert_eq!(
        resolved.provenance["models.fast.extra_body"],
        Source::InitializationOptions
    );
    layers.remove(&Source::WorkspaceConfiguration);
    assert_eq!(layers.resolve().unwrap().config.completion.debounce_ms, 30);
    let order: Vec<&Source> = layers.iter().map(|(s, _)| s).collect();
    assert_eq!(
        order,
        [&user(), &workspace(), &Source::InitializationOptions]
    );
}

#[test]
fn null_means_not_set() {
    let mut layers = five_layers();
    layers.set(
        Source::WorkspaceConfiguration,
        json!({"completion": {"debounce_ms": null, "model": null}, "log": null}),
    );
    let resolved = layers.resolve().unwrap();
    assert_eq!(resolved.config.completion.debounce_ms, 30);
    assert_eq!(resolved.config.completion.model, "fast");
    assert_eq!(
        resolved.provenance["completion.debounce_ms"],
        Source::InitializationOptions
    );
    // A whole-layer null (no initializationOptions) is an empty layer.
    layers.set(Source::InitializationOptions, serde_json::Value::Null);
    assert_eq!(layers.resolve().unwrap().config.completion.debounce_ms, 20);
}

#[test]
fn a_layer_that_is_not_a_table_is_an_error() {
    let mut layers = ConfigLayers::default();
    layers.set(Source::InitializationOptions, json!("sk-not-echoed"));
    let err = layers.resolve().unwrap_err();
    assert_eq!(
        err.to_string(),
        "initializationOptions: expected a table of settings, found a string"
    );
}

#[test]
fn user_may_override_the_builtin_model() {
    let mut layers = ConfigLayers::default();
    layers.set(
        user(),
        json!({"models": {"local": {"path": "/m/other.gguf", "max_tokens": 64}}}),
    );
    let resolved = layers.resolve().unwrap();
    let local = &resolved.config.models[BUILTIN_MODEL];
    assert_eq!(local.path.as_deref(), Some("/m/other.gguf"));
    assert_eq!(local.max_tokens, 64);
    assert_eq!(local.provider, Provider::Local);
    assert_eq!(
        resolved.provenance["models.local.provider"],
        Source::Default
    );
    assert_eq!(resolved.provenance["models.local.path"], user());
}

#[test]
fn an_embedded_model_left_unset_gets_the_agents_time_limit() {
    let mut layers = ConfigLayers::default();
    layers.set(
        user(),
        json!({"models": {
            "mine": {"provider": "local", "path": "/m/coder.gguf"},
            "tight": {"provider": "local", "path": "/m/coder.gguf", "total_timeout_ms": 90000},
            "remote": {"provider": "openai", "model": "m"}
        }}),
    );
    let models = layers.resolve().unwrap().config.models;
    // A turn of the agent prefills thousands of tokens on a CPU: minutes.
    assert_eq!(models["mine"].total_timeout_ms, 600_000);
    assert_eq!(models["tight"].total_timeout_ms, 90_000);
    assert_eq!(models["remote"].total_timeout_ms, 120_000);
}

#[test]
fn failed_resolve_changes_nothing_and_keeps_no_partial_state() {
    let mut layers = five_layers();
    let good = layers.resolve().unwrap();
    layers.set(
        Source::WorkspaceConfiguration,
        json!({"completion": {"model": "nope"}}),
    );
    let before: Vec<(Source, serde_json::Value)> =
        layers.iter().map(|(s, v)| (s.clone(), v.clone())).collect();
    assert!(layers.resolve().is_err());
    let after: Vec<(Source, serde_json::Value)> =
        layers.iter().map(|(s, v)| (s.clone(), v.clone())).collect();
    assert_eq!(before, after);
    // The caller still holds `good`; fixing the layer brings a new valid result.
    layers.set(
        Source::WorkspaceConfiguration,
        json!({"completion": {"model": "local"}}),
    );
    let fixed = layers.resolve().unwrap();
    assert_eq!(fixed.config.completion.model, "local");
    assert_eq!(good.config.completion.model, "fast");
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn load_files_reads_user_and_workspace_files() {
    let tmp = tempfile::tempdir().unwrap();
    let user_file = write(
        tmp.path(),
        "xdg/fettle/config.toml",
        "[completion]\ndebounce_ms = 5\nmax_prompt_tokens = 7\n",
    );
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let c = tmp.path().join("c"); // no fettle.toml: not an error
    write(
        &a,
        "fettle.toml",
        "[completion]\ndebounce_ms = 10\n[agent]\nmax_iterations = 2\n",
    );
    write(&b, "fettle.toml", "[completion]\ndebounce_ms = 20\n");
    std::fs::create_dir_all(&c).unwrap();

    let (layers, errors) =
        ConfigLayers::load_files_from(Some(&user_file), &[a.clone(), b.clone(), c]);
    assert_eq!(errors, []);
    let resolved = layers.resolve().unwrap();
    assert_eq!(
        resolved.config.completion.debounce_ms, 20,
        "a later root overrides an earlier one"
    );
    assert_eq!(resolved.config.completion.max_prompt_tokens, 7);
    assert_eq!(resolved.config.agent.max_iterations, 2);
    assert_eq!(
        resolved.provenance["completion.debounce_ms"],
        Source::WorkspaceFile(b.join("fettle.toml"))
    );
    assert_eq!(
        resolved.provenance["agent.max_iterations"],
        Source::WorkspaceFile(a.join("fettle.toml"))
    );
    assert_eq!(
        resolved.provenance["completion.max_prompt_tokens"],
        Source::UserFile(user_file)
    );

    // The roots' order decides, whatever their names sort as.
    let (layers, _) = ConfigLayers::load_files_from(None, &[b, a]);
    assert_eq!(layers.resolve().unwrap().config.completion.debounce_ms, 10);
}

#[test]
fn missing_files_are_not_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (layers, errors) = ConfigLayers::load_files_from(
        Some(&tmp.path().join("nope/config.toml")),
        &[tmp.path().join("none")],
    );
    assert_eq!(errors, []);
    assert_eq!(layers.iter().count(), 0);
    assert_eq!(layers.resolve().unwrap().config, Config::default());
}

#[test]
fn toml_syntax_errors_name_the_file_line_and_column() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/syntax");
    let cases = [
        ("unterminated_string.toml", 3, 15),
        ("duplicate_table.toml", 3, 1),
    ];
    for (name, line, col) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(fixtures.join(name)).unwrap();
        let file = write(tmp.path(), "fettle.toml", &text);
        let (layers, errors) = ConfigLayers::load_files_from(None, &[tmp.path().to_path_buf()]);
        assert_eq!(errors.len(), 1, "{name}");
        assert_eq!(
            errors[0].path,
            format!("{}:{line}:{col}", file.display()),
            "{name}: {}",
            errors[0]
        );
        assert!(
            errors[0].message.starts_with("invalid TOML: "),
            "{}",
            errors[0]
        );
        assert_eq!(
            layers.iter().count(),
            0,
            "a broken file contributes nothing"
        );
    }
}

#[test]
fn reloading_a_broken_file_keeps_the_previous_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "fettle.toml",
        "[completion]\ndebounce_ms = 10\n",
    );
    let roots = [tmp.path().to_path_buf()];
    let (mut layers, _) = ConfigLayers::load_files_from(None, &roots);
    layers.set(
        Source::InitializationOptions,
        json!({"agent": {"timeout_s": 5}}),
    );
    let source = Source::WorkspaceFile(file.clone());

    std::fs::write(&file, "[completion\n").unwrap();
    assert!(layers.reload_file(&source).is_err());
    assert_eq!(layers.resolve().unwrap().config.completion.debounce_ms, 10);
    let errors = layers.reload_files_from(None, &roots);
    assert_eq!(errors.len(), 1);
    assert_eq!(layers.resolve().unwrap().config.completion.debounce_ms, 10);

    std::fs::write(&file, "[completion]\ndebounce_ms = 20\n").unwrap();
    assert_eq!(layers.reload_files_from(None, &roots), []);
    let resolved = layers.resolve().unwrap();
    assert_eq!(resolved.config.completion.debounce_ms, 20);
    assert_eq!(
        resolved.config.agent.timeout_s, 5,
        "client layers are untouched"
    );

    std::fs::remove_file(&file).unwrap();
    layers.reload_file(&source).unwrap();
    assert_eq!(
        layers.resolve().unwrap().config.completion.debounce_ms,
        0,
        "a deleted file's layer goes"
    );
}

#[test]
fn reloading_files_follows_the_current_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    write(&a, "fettle.toml", "[completion]\ndebounce_ms = 10\n");
    write(&b, "fettle.toml", "[completion]\ndebounce_ms = 20\n");
    let (mut layers, _) = ConfigLayers::load_files_from(None, &[a.clone(), b.clone()]);
    assert_eq!(layers.resolve().unwrap().config.completion.debounce_ms, 20);
    layers.reload_files_from(None, &[b.clone(), a.clone()]);
    assert_eq!(layers.resolve().unwrap().config.completion.debounce_ms, 10);
    layers.reload_files_from(None, &[b]);
    assert_eq!(
        layers.resolve().unwrap().config.completion.debounce_ms,
        20,
        "a removed root's file goes"
    );
    assert_eq!(layers.iter().count(), 1);
}

#[test]
fn model_helpers() {
    let m = ModelConfig::new(Provider::Mistral);
    assert_eq!(
        m.effective_base_url(),
        Some("https://codestral.mistral.ai/v1")
    );
    assert_eq!(ModelConfig::builtin_local().effective_base_url(), None);
    assert_eq!(
        fettle::config::expand_home("/abs/x.gguf"),
        PathBuf::from("/abs/x.gguf")
    );
    let names: Vec<&str> = Provider::ALL.iter().map(|p| p.as_str()).collect();
    assert_eq!(
        names,
        [
            "local",
            "openai",
            "anthropic",
            "ollama",
            "mistral",
            "llamacpp"
        ]
    );
    assert_eq!("llamacpp".parse::<Provider>(), Ok(Provider::LlamaCpp));
}
