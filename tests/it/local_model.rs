//! The real embedded model (SmolLM2-135M-Instruct through llama.cpp).
//!
//! Needs the GGUF that `fettle model fetch` installs; `.ci/run` fetches it
//! and sets FETTLE_REQUIRE_MODEL=1 so that a missing model fails CI instead
//! of skipping. FETTLE_TEST_MODEL overrides the path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use fettle::config::{ModelConfig, Provider};
use fettle::model::{
    ChatEvent, ChatRequest, FimRequest, GenOptions, Message, Model, ModelError, StopReason,
};
use futures::StreamExt;

pub(crate) fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("FETTLE_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| fettle::config::expand_home(fettle::config::DEFAULT_LOCAL_MODEL_PATH));
    if path.is_file() {
        return Some(path);
    }
    if std::env::var_os("FETTLE_REQUIRE_MODEL").is_some_and(|v| v == "1") {
        panic!(
            "the embedded model is required but {} is missing; run `fettle model fetch`",
            path.display()
        );
    }
    eprintln!(
        "skipping: {} is missing (run `fettle model fetch`)",
        path.display()
    );
    None
}

/// A model with its own engine: each test uses a distinct context size, so
/// tests running in parallel never share a KV cache or statistics.
fn local(path: &std::path::Path, context_tokens: u32) -> Model {
    let mut cfg = ModelConfig::new(Provider::Local);
    cfg.path = Some(path.display().to_string());
    cfg.context_tokens = context_tokens;
    cfg.temperature = 0.0;
    cfg.total_timeout_ms = 120_000;
    Model::new("local", &cfg).unwrap()
}

fn fim(prefix: &str, suffix: &str, max_tokens: u32) -> FimRequest {
    FimRequest {
        prefix: prefix.to_string(),
        suffix: suffix.to_string(),
        options: GenOptions {
            max_tokens: Some(max_tokens),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn collect(model: &Model, req: FimRequest) -> Result<String, ModelError> {
    let mut stream = model.fim(req);
    let mut out = String::new();
    while let Some(piece) = stream.next().await {
        out.push_str(&piece?);
    }
    Ok(out)
}

const PREFIX: &str = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n    return ";
const SUFFIX: &str = "\n\n\nprint(fibonacci(10))\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completes_a_short_prompt_with_its_own_tokenizer() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 1024);
    let text = collect(&model, fim(PREFIX, SUFFIX, 8)).await.unwrap();
    assert!(!text.trim().is_empty(), "empty completion");
    let stats = model.local_stats().unwrap();
    assert!(
        stats.generated_tokens >= 1 && stats.generated_tokens <= 8,
        "{stats:?}"
    );
    // Loaded now: counting uses the model's own vocabulary, where ChatML's
    // markers are single special tokens and StarCoder's FIM markers are not
    // tokens at all (SmolLM2 has none), which is why `auto` completes the
    // prefix instead of feeding `<fim_prefix>` to it as text.
    assert_eq!(model.count_tokens("<|im_start|>"), 1);
    assert!(model.count_tokens("<fim_prefix>") > 1);
    assert!(!text.contains("fim_"), "{text:?}");
    assert!(model.count_tokens("fn main() {}") >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_reuses_the_kv_cache_and_an_edit_drops_only_what_diverged() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 1025);
    let body: String = (0..40)
        .map(|i| format!("    total = total + values[{i}] * {i}\n"))
        .collect();
    let prefix = format!("def weighted(values):\n    total = 0\n{body}    return ");
    collect(&model, fim(&prefix, "\n", 2)).await.unwrap();
    let cold = model.local_stats().unwrap();
    assert_eq!(cold.reused_tokens, 0, "{cold:?}");
    assert!(cold.prompt_tokens > 300, "{cold:?}");

    // Three characters typed at the cursor: suffix-first prompts put the
    // cursor at the end, so all but the last few tokens are reused.
    let typed = format!("{prefix}tot");
    collect(&model, fim(&typed, "\n", 2)).await.unwrap();
    let warm = model.local_stats().unwrap();
    assert!(warm.prompt_tokens - warm.reused_tokens <= 4, "{warm:?}");

    // An edit near the top invalidates everything after it.
    let edited = typed.replacen("total = 0", "total = 1", 1);
    collect(&model, fim(&edited, "\n", 2)).await.unwrap();
    let after_edit = model.local_stats().unwrap();
    assert!(after_edit.reused_tokens > 0, "{after_edit:?}");
    assert!(after_edit.reused_tokens < 40, "{after_edit:?}");
}

/// Each file keeps its own cached prompt (a KV sequence per file): going
/// back to a file after completing in two others reuses what it had, and
/// a chat in between does not evict it either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn going_back_to_a_file_reuses_its_cached_prompt() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 4093);
    collect(&model, python_file("alpha", 30)).await.unwrap();
    let alpha = model.local_stats().unwrap();
    assert!(alpha.prompt_tokens > 300, "{alpha:?}");
    collect(&model, python_file("beta", 30)).await.unwrap();
    collect(&model, python_file("gamma", 30)).await.unwrap();
    let chat = ChatRequest {
        messages: vec![Message::user("Say OK.")],
        tools: Vec::new(),
        options: GenOptions {
            max_tokens: Some(2),
            ..Default::default()
        },
    };
    let mut stream = model.chat(chat);
    while stream.next().await.is_some() {}
    // Back in alpha, three characters typed: nearly all of it is cached.
    let mut back = python_file("alpha", 30);
    back.prefix.push_str("val");
    collect(&model, back).await.unwrap();
    let again = model.local_stats().unwrap();
    assert!(
        again.prompt_tokens - again.reused_tokens <= 4,
        "alpha was evaluated again: {again:?}"
    );
}

fn python_file(name: &str, lines: usize) -> FimRequest {
    let body: String = (0..lines)
        .map(|i| format!("    {name}_{i} = {name}_{i} + values[{i}] * {i}\n"))
        .collect();
    let mut req = fim(&format!("def {name}(values):\n{body}    return "), "\n", 2);
    req.path = Some(format!("{name}.py"));
    req
}

/// Waits until the engine's warm-ups have evaluated more than `before`
/// tokens (a warm-up has no answer to wait for).
async fn warmed_beyond(model: &Model, before: u64) -> u64 {
    for _ in 0..600 {
        let warmed = model.local_stats().map_or(0, |s| s.warmed_tokens);
        if warmed > before {
            return warmed;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the warm-up did not run within a minute");
}

/// A warm-up evaluates the prompt ahead of the request: the request that
/// follows (three characters typed there) evaluates only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_up_prepares_the_next_request() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 4091);
    // Something else first, so that the counters exist.
    collect(&model, python_file("other", 2)).await.unwrap();
    model.warm(python_file("alpha", 30));
    let warmed = warmed_beyond(&model, 0).await;
    assert!(warmed > 300, "the whole prompt is warmed: {warmed}");
    let mut typed = python_file("alpha", 30);
    typed.prefix.push_str("val");
    collect(&model, typed).await.unwrap();
    let stats = model.local_stats().unwrap();
    assert!(stats.prompt_tokens > 300, "{stats:?}");
    assert!(
        stats.prompt_tokens - stats.reused_tokens <= 4,
        "the request found the warmed prompt: {stats:?}"
    );
}

/// A warm-up with a latency target comes in two stages: the prompt fitted
/// to the target first (ready soon, so that a request after a short pause
/// finds it cached), then the wider one. Before, only the wide one ran,
/// and a request that came before it was done found nothing it could use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_up_readies_the_short_prompt_first() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 4087);
    collect(&model, python_file("other", 2)).await.unwrap();
    // ~3000 tokens: more than either stage takes at any plausible speed.
    let mut req = python_file("alpha", 200);
    req.options.latency_target = Some(Duration::from_millis(400));
    model.warm(req.clone());
    let short = warmed_beyond(&model, 0).await;
    let wide = warmed_beyond(&model, short).await - short;
    assert!(
        wide > 2 * short,
        "the short prompt ({short} tokens) came first, then the wide one ({wide})"
    );
    // The request there finds the wide prompt cached.
    req.prefix.push_str("val");
    collect(&model, req).await.unwrap();
    let stats = model.local_stats().unwrap();
    assert!(stats.prompt_tokens as u64 >= wide, "{stats:?}");
    assert!(
        stats.prompt_tokens - stats.reused_tokens <= 4,
        "the request found the warmed prompt: {stats:?}"
    );
}

/// A warm-up works in a sequence of its own: one that a request
/// interrupts (or that never starts) leaves the file's cached prompt as it
/// was, so a keystroke after a short pause is not slowed by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_up_yields_and_leaves_the_files_prompt_intact() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 4089);
    collect(&model, python_file("alpha", 30)).await.unwrap();
    // A long, different prompt for the same file (the user moved away)...
    let mut elsewhere = python_file("alpha", 30);
    elsewhere.prefix = format!("# moved\n{}", python_file("zeta", 120).prefix);
    model.warm(elsewhere);
    // ...and at once a keystroke where the user was.
    let mut typed = python_file("alpha", 30);
    typed.prefix.push_str("val");
    collect(&model, typed).await.unwrap();
    let stats = model.local_stats().unwrap();
    assert!(
        stats.prompt_tokens - stats.reused_tokens <= 4,
        "the file's prompt survived the warm-up: {stats:?}"
    );
    assert!(
        stats.warmed_tokens < 1000,
        "the warm-up gave way to the request: {stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_generation_and_the_next_request_works() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 1026);
    let mut stream = model.fim(fim(PREFIX, SUFFIX, 400));
    let first = stream.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(stream);
    let text = collect(&model, fim("import os\n", "", 3)).await.unwrap();
    assert!(!text.is_empty());
    let stats = model.local_stats().unwrap();
    // The first request was stopped (not run on to its 400 tokens), and
    // these counters are the second one's.
    assert_eq!(stats.cancelled_jobs, 1, "{stats:?}");
    assert!(stats.generated_tokens <= 3, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_streams_text_usage_and_one_stop() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 1027);
    let mut stream = model.chat(ChatRequest {
        messages: vec![
            Message::system("You are a helpful assistant."),
            Message::user("What is the capital of France? Answer in one word."),
        ],
        tools: Vec::new(),
        options: GenOptions {
            max_tokens: Some(8),
            ..Default::default()
        },
    });
    let mut text = String::new();
    let mut stops = Vec::new();
    let mut usage = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            ChatEvent::TextDelta(t) => text.push_str(&t),
            ChatEvent::Usage(u) => usage = Some(u),
            ChatEvent::Stop(r) => stops.push(r),
            ChatEvent::ToolCall(c) => panic!("unexpected tool call {c:?}"),
        }
    }
    assert!(!text.trim().is_empty());
    assert!(!text.contains("<|im_end|>"), "{text:?}");
    assert_eq!(stops.len(), 1);
    assert!(matches!(
        stops[0],
        StopReason::EndTurn | StopReason::MaxTokens | StopReason::StopSequence
    ));
    let usage = usage.unwrap();
    assert!(
        usage.input_tokens > 10 && usage.output_tokens >= 1,
        "{usage:?}"
    );
}

#[tokio::test]
async fn a_missing_model_names_the_fetch_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ModelConfig::new(Provider::Local);
    cfg.path = Some(dir.path().join("absent.gguf").display().to_string());
    let model = Model::new("local", &cfg).unwrap();
    let err = collect(&model, fim("a", "b", 2)).await.unwrap_err();
    assert!(matches!(err, ModelError::MissingWeights { .. }), "{err:?}");
    assert!(err.to_string().contains("fettle model fetch"), "{err}");

    // Not a GGUF file: a clear message, not a llama.cpp crash.
    let fake = dir.path().join("fake.gguf");
    std::fs::write(&fake, b"not a model").unwrap();
    cfg.path = Some(fake.display().to_string());
    let model = Model::new("local", &cfg).unwrap();
    let err = collect(&model, fim("a", "b", 2)).await.unwrap_err();
    assert!(err.to_string().contains("is not a GGUF file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_context_is_refused_clearly() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 256);
    let long = "x = 1\n".repeat(400);
    let err = collect(&model, fim(&long, "", 8)).await.unwrap_err();
    assert!(err.to_string().contains("context_tokens"), "{err}");
    // The engine stays usable.
    assert!(!collect(&model, fim("import ", "", 2))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuilt_models_share_the_warm_engine_until_nobody_uses_it() {
    let Some(path) = model_path() else { return };
    let first = local(&path, 1028);
    collect(&first, fim("import sys\n", "", 2)).await.unwrap();
    // A configuration reload builds the new model while the old one lives:
    // same weights and settings, same engine, same warm KV cache.
    let rebuilt = local(&path, 1028);
    assert!(rebuilt.local_stats().is_some());
    collect(&rebuilt, fim("import sys\nimport os\n", "", 2))
        .await
        .unwrap();
    assert!(rebuilt.local_stats().unwrap().reused_tokens > 0);
    drop(first);
    drop(rebuilt);
    // Nobody holds it any more: the engine is gone, a new one starts cold.
    let fresh = local(&path, 1028);
    assert!(fresh.local_stats().is_none());
}

/// The agent's model (`Model::new_background`) is the same model on its own
/// engine: it answers, and the interactive engine keeps serving completions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_background_model_answers_beside_the_interactive_one() {
    let Some(path) = model_path() else { return };
    let mut cfg = ModelConfig::new(Provider::Local);
    cfg.path = Some(path.display().to_string());
    cfg.context_tokens = 1029;
    cfg.temperature = 0.0;
    cfg.total_timeout_ms = 120_000;
    let interactive = Model::new("local", &cfg).unwrap();
    let background = Model::new_background("local", &cfg).unwrap();
    let chat = async {
        let mut stream = background.chat(ChatRequest {
            messages: vec![Message::user("Say hello.")],
            options: GenOptions {
                max_tokens: Some(16),
                ..Default::default()
            },
            ..Default::default()
        });
        let mut stops = 0;
        while let Some(event) = stream.next().await {
            if let ChatEvent::Stop(_) = event.unwrap() {
                stops += 1;
            }
        }
        stops
    };
    let (stops, completion) = tokio::join!(chat, collect(&interactive, fim(PREFIX, SUFFIX, 8)));
    assert_eq!(stops, 1);
    completion.unwrap();
    // Each engine records its request's statistics just after the stream
    // ends; give them a moment.
    let stats = |m: &Model| {
        let m = m.clone();
        async move {
            for _ in 0..100 {
                if let Some(s) = m.local_stats() {
                    return s;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("no statistics recorded");
        }
    };
    let (a, b) = (stats(&interactive).await, stats(&background).await);
    assert_ne!(
        a.prompt_tokens, b.prompt_tokens,
        "one engine served both: {a:?} {b:?}"
    );
}

/// A completion whose decode budget (its latency target, prefill
/// included) is spent stops at the next line end instead of decoding to
/// `max_tokens`; without a target (chat, the agent) it goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_stops_at_a_line_end_once_its_decode_budget_is_spent() {
    let Some(path) = model_path() else { return };
    let model = local(&path, 1031);
    let prefix = "# Three small helpers.\n\ndef add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n";
    let mut req = fim(prefix, "", 96);
    req.options.latency_target = Some(Duration::from_millis(1));
    let text = collect(&model, req).await.unwrap();
    let stats = model.local_stats().unwrap();
    let first_break = text.find('\n').unwrap_or(text.len());
    assert!(
        text[first_break..].trim().is_empty(),
        "more than one line after the budget: {text:?}"
    );
    assert!(stats.generated_tokens < 96, "{stats:?} {text:?}");

    let unbounded = collect(&model, fim(prefix, "", 96)).await.unwrap();
    assert!(
        unbounded.trim_end().contains('\n'),
        "the same prompt without a target writes more lines: {unbounded:?}"
    );
}
