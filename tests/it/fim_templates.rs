//! Fill-in-the-middle templates (`fettle::model::fim`): golden renderings
//! for every template, the plain layouts token by token, `auto` resolution.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fettle::config::{FimTemplate, Provider};
use fettle::model::fim::{
    comment_syntax, hole_marker, render, resolve, snippet_header, stop_sequences, supports_spm,
    template_for_model, FimOrder, FimPrompt, RenderedFim, HOLE_MARKER,
};
use fettle::model::{FimRequest, GenOptions, Role, Snippet};

fn snippet(path: &str, text: &str) -> Snippet {
    Snippet {
        path: path.into(),
        text: text.into(),
    }
}

/// A Rust function being written in `src/lib.rs`, with two snippets from
/// other files (the second without a final newline) and request stops, one
/// of which repeats a template stop.
fn rust_request() -> FimRequest {
    FimRequest {
        prefix: "use crate::point::Point;\n\n/// Distance between two points.\npub fn distance(a: &Point, b: &Point) -> f64 {\n    let dx = b.x - a.x;\n    ".into(),
        suffix: "\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n".into(),
        snippets: vec![
            snippet(
                "src/point.rs",
                "/// A point in the plane.\n#[derive(Clone, Copy, Debug, PartialEq)]\npub struct Point {\n    pub x: f64,\n    pub y: f64,\n}\n",
            ),
            snippet("src/math/util.rs", "pub fn square(v: f64) -> f64 {\n    v * v\n}"),
        ],
        path: Some("src/lib.rs".into()),
        repo_name: Some("demo".into()),
        options: GenOptions {
            stop: vec!["\n\n\n".into(), "<|endoftext|>".into()],
            ..GenOptions::default()
        },
    }
}

/// A Python file with snippets in three comment syntaxes, no repository name.
fn python_request() -> FimRequest {
    FimRequest {
        prefix: "from app.models import Order\n\n\ndef order_total(order: Order) -> float:\n    "
            .into(),
        suffix: "\n\n\ndef main():\n    pass\n".into(),
        snippets: vec![
            snippet(
                "app/models.py",
                "class Order:\n    def __init__(self, lines):\n        self.lines = lines\n",
            ),
            snippet(
                "db/schema.sql",
                "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n",
            ),
            snippet("templates/order.html", "<p>{{ order.total }}</p>\n"),
        ],
        path: Some("app/orders.py".into()),
        repo_name: None,
        options: GenOptions::default(),
    }
}

/// The plainest request: no snippets, no path, no repository.
fn bare_request() -> FimRequest {
    FimRequest {
        prefix: "fn add(a: i32, b: i32) -> i32 {\n    ".into(),
        suffix: "\n}\n".into(),
        ..FimRequest::default()
    }
}

const END: &str = "«END»";

/// A readable rendering: the prompt's parts, each closed by `«END»` so
/// trailing whitespace shows, then the stops one per line.
fn show(rendered: &RenderedFim) -> String {
    let mut out = String::new();
    match &rendered.prompt {
        FimPrompt::Text(text) => {
            out.push_str(&format!("[text]\n{text}{END}\n"));
        }
        FimPrompt::Split { prompt, suffix } => {
            out.push_str(&format!("[split: prompt]\n{prompt}{END}\n"));
            out.push_str(&format!("[split: suffix]\n{suffix}{END}\n"));
        }
        FimPrompt::Chat(messages) => {
            for message in messages {
                let role = match message.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                    Role::Tool => "tool",
                };
                out.push_str(&format!("[chat: {role}]\n{}{END}\n", message.content));
            }
        }
    }
    out.push_str("[stop]\n");
    for stop in &rendered.stop {
        out.push_str(&format!("{stop:?}\n"));
    }
    out
}

/// PSM and SPM renderings of `req`, SPM shown as "same as PSM" when equal.
fn show_both(template: FimTemplate, req: &FimRequest) -> String {
    let psm = render(template, req, FimOrder::Psm);
    let spm = render(template, req, FimOrder::Spm);
    let mut out = format!("===== {template} PSM =====\n{}", show(&psm));
    if spm == psm {
        out.push_str(&format!("===== {template} SPM: same as PSM =====\n"));
    } else {
        out.push_str(&format!("===== {template} SPM =====\n{}", show(&spm)));
    }
    out
}

#[test]
fn golden_rust_every_template() {
    let req = rust_request();
    for &template in FimTemplate::ALL {
        insta::assert_snapshot!(format!("rust_{template}"), show_both(template, &req));
    }
}

#[test]
fn golden_python_comment_syntax() {
    let req = python_request();
    for template in [
        FimTemplate::None,
        FimTemplate::DeepSeek,
        FimTemplate::StarCoder,
        FimTemplate::Qwen,
        FimTemplate::Chat,
    ] {
        let rendered = render(template, &req, FimOrder::Psm);
        insta::assert_snapshot!(format!("python_{template}"), show(&rendered));
    }
}

/// The plain layouts, spelled out token by token (no snippets, no path, no
/// repository: nothing but the sentinels, prefix and suffix).
#[test]
fn plain_layouts_token_by_token() {
    let req = bare_request();
    let p = "fn add(a: i32, b: i32) -> i32 {\n    ";
    let s = "\n}\n";
    let text = |template, order| match render(template, &req, order).prompt {
        FimPrompt::Text(t) => t,
        other => panic!("{template}: expected text, got {other:?}"),
    };
    use FimOrder::{Psm, Spm};
    use FimTemplate as T;
    let cases: &[(FimTemplate, FimOrder, String)] = &[
        (
            T::StarCoder,
            Psm,
            format!("<fim_prefix>{p}<fim_suffix>{s}<fim_middle>"),
        ),
        (
            T::StarCoder,
            Spm,
            format!("<fim_prefix><fim_suffix>{s}<fim_middle>{p}"),
        ),
        (T::CodeLlama, Psm, format!("<PRE> {p} <SUF>{s} <MID>")),
        (T::CodeLlama, Spm, format!("<PRE> <SUF>{s} <MID> {p}")),
        (
            T::DeepSeek,
            Psm,
            format!("<｜fim▁begin｜>{p}<｜fim▁hole｜>{s}<｜fim▁end｜>"),
        ),
        (
            T::DeepSeek,
            Spm,
            format!("<｜fim▁begin｜>{p}<｜fim▁hole｜>{s}<｜fim▁end｜>"),
        ),
        (
            T::Qwen,
            Psm,
            format!("<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>"),
        ),
        (
            T::Qwen,
            Spm,
            format!("<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>"),
        ),
        (T::Codestral, Psm, format!("[SUFFIX]{s}[PREFIX] {p}")),
        (T::Codestral, Spm, format!("[SUFFIX]{s}[PREFIX] {p}")),
        (
            T::CodeGemma,
            Psm,
            format!("<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>"),
        ),
        (
            T::Granite,
            Psm,
            format!("<fim_prefix>{p}<fim_suffix>{s}<fim_middle>"),
        ),
        (T::None, Psm, p.to_string()),
        (T::None, Spm, p.to_string()),
    ];
    for (template, order, expected) in cases {
        assert_eq!(&text(*template, *order), expected, "{template} {order:?}");
    }
    assert_eq!(
        render(T::Suffix, &req, Spm).prompt,
        FimPrompt::Split {
            prompt: p.into(),
            suffix: s.into()
        }
    );
}

#[test]
fn deepseek_sentinels_use_fullwidth_bar_and_lower_block() {
    let FimPrompt::Text(text) =
        render(FimTemplate::DeepSeek, &bare_request(), FimOrder::Psm).prompt
    else {
        panic!("deepseek renders text");
    };
    // U+FF5C FULLWIDTH VERTICAL LINE and U+2581 LOWER ONE EIGHTH BLOCK.
    assert!(text.starts_with("<\u{ff5c}fim\u{2581}begin\u{ff5c}>"));
    assert!(text.contains("<\u{ff5c}fim\u{2581}hole\u{ff5c}>"));
    assert!(text.ends_with("<\u{ff5c}fim\u{2581}end\u{ff5c}>"));
    assert!(!text.contains("<|fim"));
    assert_eq!(
        stop_sequences(FimTemplate::DeepSeek)[0],
        "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>"
    );
}

#[test]
fn spm_falls_back_to_psm_where_the_model_was_not_trained_for_it() {
    let req = rust_request();
    for &template in FimTemplate::ALL {
        let psm = render(template, &req, FimOrder::Psm);
        let spm = render(template, &req, FimOrder::Spm);
        let same = psm == spm;
        // Codestral is suffix-first either way.
        let expect_same = !supports_spm(template) || template == FimTemplate::Codestral;
        assert_eq!(same, expect_same, "{template}");
    }
    for template in [
        FimTemplate::StarCoder,
        FimTemplate::CodeLlama,
        FimTemplate::Codestral,
    ] {
        let FimPrompt::Text(text) = render(template, &req, FimOrder::Spm).prompt else {
            panic!("{template} renders text");
        };
        assert!(
            text.ends_with(&req.prefix),
            "{template}: SPM must end with the prefix"
        );
    }
}

#[test]
fn snippets_come_before_the_suffix_in_spm() {
    let req = rust_request();
    for template in [
        FimTemplate::StarCoder,
        FimTemplate::CodeLlama,
        FimTemplate::Codestral,
    ] {
        let FimPrompt::Text(text) = render(template, &req, FimOrder::Spm).prompt else {
            panic!("{template} renders text");
        };
        let snippet_at = text.find("pub struct Point").unwrap();
        let prefix_at = text.rfind(&req.prefix).unwrap();
        assert!(snippet_at < prefix_at, "{template}");
    }
    // The repository-level form puts them first of all.
    let FimPrompt::Text(text) = render(FimTemplate::StarCoder, &req, FimOrder::Spm).prompt else {
        panic!("starcoder renders text");
    };
    assert!(text.find("pub struct Point").unwrap() < text.find("<fim_suffix>").unwrap());
}

#[test]
fn stops_are_the_templates_then_the_requests_without_repeats() {
    let mut req = bare_request();
    req.options.stop = vec![
        "\n\n".into(),
        "<|endoftext|>".into(),
        String::new(),
        "\n\n".into(),
    ];
    let rendered = render(FimTemplate::StarCoder, &req, FimOrder::Psm);
    let mut expected: Vec<String> = stop_sequences(FimTemplate::StarCoder)
        .iter()
        .map(|s| s.to_string())
        .collect();
    expected.push("\n\n".into());
    assert_eq!(rendered.stop, expected);
    // Templates without stops of their own pass the request's through.
    let rendered = render(FimTemplate::Chat, &req, FimOrder::Psm);
    assert_eq!(rendered.stop, vec!["\n\n", "<|endoftext|>"]);
}

#[test]
fn auto_at_render_time_means_chat() {
    let req = rust_request();
    assert_eq!(
        render(FimTemplate::Auto, &req, FimOrder::Psm),
        render(FimTemplate::Chat, &req, FimOrder::Psm)
    );
}

#[test]
fn chat_hole_marker_is_unique() {
    let mut req = bare_request();
    assert_eq!(hole_marker(&req), HOLE_MARKER);
    req.prefix = format!("let template = \"{HOLE_MARKER}\";\n{}", req.prefix);
    let marker = hole_marker(&req);
    assert_eq!(marker, "{{FILL_HERE_2}}");
    let FimPrompt::Chat(messages) = render(FimTemplate::Chat, &req, FimOrder::Psm).prompt else {
        panic!("chat renders messages");
    };
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].role, Role::System);
    assert!(messages[0].content.contains(&marker));
    assert!(messages[1]
        .content
        .contains(&format!("{}{marker}{}", req.prefix, req.suffix)));
}

#[test]
fn comment_syntax_by_extension() {
    let cases = [
        ("src/a.rs", "// Path: src/a.rs"),
        ("a.py", "# Path: a.py"),
        ("web/app.js", "// Path: web/app.js"),
        ("web/app.tsx", "// Path: web/app.tsx"),
        ("main.go", "// Path: main.go"),
        ("lib/x.c", "// Path: lib/x.c"),
        ("lib/x.hpp", "// Path: lib/x.hpp"),
        ("Main.java", "// Path: Main.java"),
        ("init.lua", "-- Path: init.lua"),
        ("app.rb", "# Path: app.rb"),
        ("run.sh", "# Path: run.sh"),
        ("Cargo.toml", "# Path: Cargo.toml"),
        ("ci.yaml", "# Path: ci.yaml"),
        ("q.SQL", "-- Path: q.SQL"),
        ("index.html", "<!-- Path: index.html -->"),
        ("style.css", "/* Path: style.css */"),
        ("Makefile", "# Path: Makefile"),
        ("docker/Dockerfile", "# Path: docker/Dockerfile"),
        ("README", "// Path: README"),
        (".bashrc", "// Path: .bashrc"),
        ("notes.unknown", "// Path: notes.unknown"),
    ];
    for (path, expected) in cases {
        assert_eq!(snippet_header(path), expected, "{path}");
    }
    assert_eq!(comment_syntax("a.py"), ("#", ""));
}

#[test]
fn resolve_keeps_an_explicit_template() {
    for &template in FimTemplate::ALL {
        if template == FimTemplate::Auto {
            continue;
        }
        for &provider in Provider::ALL {
            assert_eq!(resolve(template, provider, "starcoder2"), template);
        }
    }
}

#[test]
fn resolve_auto_by_model_name_then_provider() {
    use FimTemplate as T;
    use Provider as P;
    let cases: &[(P, &str, FimTemplate)] = &[
        // Names decide for local models and raw-completion servers.
        (P::Ollama, "starcoder2:3b", T::StarCoder),
        (P::OpenAi, "bigcode/starcoder2-15b", T::StarCoder),
        (P::LlamaCpp, "SantaCoder-1B", T::StarCoder),
        (P::Ollama, "stable-code:3b", T::StarCoder),
        (P::Ollama, "codellama:7b-code", T::CodeLlama),
        (P::OpenAi, "meta/Code-Llama-13b", T::CodeLlama),
        (P::Ollama, "deepseek-coder:6.7b-base", T::DeepSeek),
        (P::Ollama, "deepseek-coder-v2:16b", T::DeepSeek),
        (P::OpenAi, "Qwen/Qwen2.5-Coder-7B", T::Qwen),
        (P::Ollama, "qwen2.5-coder:1.5b", T::Qwen),
        (P::Ollama, "qwen3-coder:30b", T::Qwen),
        (P::Local, "qwen2.5-coder-0.5b-q8_0", T::Qwen),
        (P::Ollama, "codestral:22b", T::Codestral),
        (P::OpenAi, "mistralai/Codestral-22B-v0.1", T::Codestral),
        (P::Ollama, "codegemma:2b", T::CodeGemma),
        (P::Ollama, "granite-code:8b", T::Granite),
        (P::OpenAi, "ibm-granite/granite-3.3-8b-base", T::Granite),
        (P::Ollama, "granite4:micro", T::CodeGemma),
        // SmolLM has no FIM tokens: plain continuation.
        (P::Local, "SmolLM2-135M-Instruct", T::None),
        // Chat models that merely share a family name.
        (P::OpenAi, "deepseek-chat", T::Chat),
        (P::OpenAi, "qwen2.5-72b-instruct", T::Chat),
        (P::Ollama, "qwen2.5:7b", T::Suffix),
        // Unknown names: the provider's default.
        (P::Local, "local", T::None),
        (P::Local, "", T::None),
        (P::OpenAi, "gpt-4o-mini", T::Chat),
        (P::Ollama, "llama3.2", T::Suffix),
        (P::LlamaCpp, "llamacpp", T::Suffix),
        // Anthropic only chats; Mistral's FIM endpoint lays Codestral out.
        (P::Anthropic, "claude-sonnet-4-5", T::Chat),
        (P::Anthropic, "starcoder2", T::Chat),
        (P::Mistral, "codestral-latest", T::Suffix),
        (P::Mistral, "Codestral-2501", T::Suffix),
        (P::Mistral, "mistral-small-latest", T::Chat),
    ];
    for (provider, name, expected) in cases {
        assert_eq!(
            resolve(FimTemplate::Auto, *provider, name),
            *expected,
            "{provider} {name:?}"
        );
    }
    assert_eq!(template_for_model("gpt-4o"), None);
    assert_eq!(template_for_model("STARCODER"), Some(T::StarCoder));
}

#[test]
fn every_template_renders_the_prefix_and_the_suffix() {
    let req = rust_request();
    for &template in FimTemplate::ALL {
        for order in [FimOrder::Psm, FimOrder::Spm] {
            let all = match render(template, &req, order).prompt {
                FimPrompt::Text(t) => t,
                FimPrompt::Split { prompt, suffix } => format!("{prompt}{suffix}"),
                FimPrompt::Chat(messages) => messages
                    .iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            assert!(all.contains(&req.prefix), "{template} {order:?}: prefix");
            if template != FimTemplate::None {
                assert!(all.contains(&req.suffix), "{template} {order:?}: suffix");
            }
            for s in &req.snippets {
                assert!(all.contains(&s.path), "{template} {order:?}: {}", s.path);
                assert!(all.contains(&s.text), "{template} {order:?}: {}", s.path);
            }
        }
    }
}
