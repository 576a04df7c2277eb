//! The embedded model's latency: time to first token for a cold 512-token
//! prompt, for a warm one after a 3-character edit at the cursor (the KV
//! cache keeps the common prefix), after an edit further back, and decode
//! speed. Compare with llama.cpp's own `llama-bench` on the same GGUF
//! (docs/performance.md has both and the commands).
//!
//!     cargo bench --bench local_model [-- --runs N --threads T]
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fettle::config::{FimTemplate, ModelConfig, Provider};
use fettle::model::{FimRequest, GenOptions, Model};
use futures::StreamExt;

struct Args {
    runs: usize,
    threads: u32,
    model: PathBuf,
}

fn args() -> Args {
    let mut args = Args {
        runs: 5,
        threads: 0,
        model: fettle::config::expand_home(fettle::config::DEFAULT_LOCAL_MODEL_PATH),
    };
    if let Some(p) = std::env::var_os("FETTLE_TEST_MODEL") {
        args.model = PathBuf::from(p);
    }
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => args.runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(args.runs),
            "--threads" => {
                args.threads = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(args.threads)
            }
            "--model" => args.model = it.next().map(PathBuf::from).unwrap_or(args.model),
            _ => {} // cargo bench passes --bench
        }
    }
    args
}

/// Real code for the prompt: this crate's own sources.
fn corpus() -> String {
    let mut text = String::new();
    for file in [
        "src/model/http.rs",
        "src/model/local/engine.rs",
        "src/config/schema.rs",
    ] {
        text.push_str(&std::fs::read_to_string(file).unwrap_or_default());
    }
    text
}

/// A prefix of about `tokens` tokens (by the model's tokenizer) starting at
/// byte `offset` of the corpus.
fn prefix_of(model: &Model, corpus: &str, offset: usize, tokens: usize) -> String {
    let start = (offset..corpus.len())
        .find(|&i| corpus.is_char_boundary(i) && (i == 0 || corpus.as_bytes()[i - 1] == b'\n'))
        .unwrap_or(0);
    let rest = &corpus[start..];
    let (mut lo, mut hi) = (0usize, rest.len().min(tokens * 8));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let mut end = mid;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if model.count_tokens(&rest[..end]) <= tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut end = lo;
    while !rest.is_char_boundary(end) {
        end -= 1;
    }
    rest[..end].to_string()
}

struct Timing {
    first_token: Duration,
    total: Duration,
    generated: usize,
    prompt: usize,
    reused: usize,
}

async fn run(model: &Model, prefix: &str, max_tokens: u32) -> Timing {
    let req = FimRequest {
        prefix: prefix.to_string(),
        suffix: String::new(),
        options: GenOptions {
            max_tokens: Some(max_tokens),
            temperature: Some(0.0),
            stop: Vec::new(),
            latency_target: None,
        },
        ..Default::default()
    };
    let mut stream = model.fim(req);
    while let Some(piece) = stream.next().await {
        if let Err(e) = piece {
            eprintln!("generation failed: {e}");
            std::process::exit(1);
        }
    }
    let stats = model.local_stats().unwrap_or_default();
    Timing {
        first_token: stats.first_token,
        total: stats.total,
        generated: stats.generated_tokens,
        prompt: stats.prompt_tokens,
        reused: stats.reused_tokens,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = args();
    if !args.model.is_file() {
        eprintln!(
            "{} is missing; run `fettle model fetch`",
            args.model.display()
        );
        std::process::exit(1);
    }
    let mut cfg = ModelConfig::new(Provider::Local);
    cfg.path = Some(args.model.display().to_string());
    cfg.threads = args.threads;
    cfg.context_tokens = 2048;
    // The raw prompt, so that it is exactly the measured tokens.
    cfg.fim_template = FimTemplate::None;
    let model = match Model::new("local", &cfg) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let load = Instant::now();
    run(&model, "fn main() {", 1).await;
    let load = load.elapsed();
    let corpus = corpus();

    let (mut cold, mut warm, mut edit_back, mut decode) = (vec![], vec![], vec![], vec![]);
    for i in 0..args.runs {
        // A different start each run, so nothing is reused: cold.
        let prefix = prefix_of(&model, &corpus, 1 + i * 997, 511);
        let t = run(&model, &prefix, 1).await;
        assert!(t.reused <= 1, "cold run reused {} tokens", t.reused);
        cold.push(ms(t.first_token));
        // Three characters typed at the end.
        let typed = format!("{prefix}let");
        let t = run(&model, &typed, 1).await;
        warm.push(ms(t.first_token));
        eprintln!(
            "run {i}: prompt {} tokens; after typing 3 chars reused {} and evaluated {}",
            t.prompt,
            t.reused,
            t.prompt - t.reused
        );
        // An edit ~3/4 into the prompt (what a prefix-suffix-middle layout
        // costs on every keystroke: the suffix after the cursor is redone).
        let at = prefix.len() * 3 / 4;
        let at = (at..prefix.len())
            .find(|&j| prefix.is_char_boundary(j))
            .unwrap_or(at);
        let edited = format!("{}xyz{}", &prefix[..at], &prefix[at..]);
        let t = run(&model, &edited, 1).await;
        edit_back.push(ms(t.first_token));
        // Decode speed on top of the warm cache.
        let t = run(&model, &format!("{prefix}\n"), 128).await;
        if t.generated > 8 {
            decode.push((t.generated - 1) as f64 / (t.total - t.first_token).as_secs_f64());
        }
    }
    println!("embedded model: {}", args.model.display());
    println!(
        "threads: {}",
        if args.threads == 0 {
            "all cores".to_string()
        } else {
            args.threads.to_string()
        }
    );
    println!("load + first tiny request: {:.0} ms", ms(load));
    println!("| measure | median of {} |", args.runs);
    println!("|---|---|");
    println!("| TTFT, cold 512-token prompt | {:.0} ms |", median(cold));
    println!(
        "| TTFT, warm, 3 chars typed at the cursor | {:.1} ms |",
        median(warm)
    );
    println!(
        "| TTFT, warm, 3 chars inserted 1/4 from the end | {:.0} ms |",
        median(edit_back)
    );
    if !decode.is_empty() {
        println!("| decode | {:.1} tokens/s |", median(decode));
    }
}
