//! The repair loop's own overhead per iteration: `cargo bench --bench agent_loop`.
//!
//! A 300-file Python workspace; the mock model on 127.0.0.1 answers at once;
//! the test command is `false` (fails instantly, so every attempt is judged
//! and the loop runs to its iteration budget). Each iteration is three model
//! turns — `search` + `read_file`, an `edit`, then a summary — and one
//! verification. The model's round trips and the test command's runs are
//! measured on their own and subtracted: what is left is Fettle (prompt
//! building, redaction, tools, edit validation and checkpointing,
//! verification bookkeeping, rollback checks).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fettle::agent::checkpoint::CheckpointStore;
use fettle::agent::exec::{self, CommandSpec};
use fettle::agent::host::{BufferEdit, Host};
use fettle::agent::{run_task, CancellationToken, TaskEnv, TaskEvent, TaskSpec};
use fettle::config::{AgentConfig, Config, ModelConfig};
use fettle::index::{IndexProgress, IndexSettings, WorkspaceIndex};
use fettle::mock::{MockServer, MockToolCall, Script, ScriptedResponse};
use fettle::model::{ChatRequest, Message, Models};
use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const FILES: usize = 300;
const ITERATIONS: u32 = 20;
const RUNS: usize = 5;

struct Quiet;
impl Host for Quiet {
    fn event(&self, _: TaskEvent) {}
    fn buffer(&self, _: &Path) -> Option<String> {
        None
    }
    fn edit_buffer<'a>(&'a self, _: &'a Path, _: &'a str, _: &'a str) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async { BufferEdit::NotOpen })
    }
    fn approve<'a>(&'a self, _: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
}

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

fn write_workspace(root: &Path) -> Result<()> {
    std::fs::create_dir_all(root.join("app"))?;
    for i in 0..FILES {
        let mut text = format!(
            "\"\"\"Module {i}.\"\"\"\nfrom app.module_{} import helper_{}\n\n",
            (i + 1) % FILES,
            (i + 1) % FILES
        );
        for f in 0..8 {
            text.push_str(&format!(
                "def helper_{i}_{f}(values):\n    total = 0\n    for v in values:\n        total += v * {f}\n    return total\n\n\n"
            ));
        }
        text.push_str(&format!(
            "def helper_{i}(x):\n    return helper_{i}_0([x]) + 1\n"
        ));
        std::fs::write(root.join(format!("app/module_{i}.py")), text)?;
    }
    std::fs::write(
        root.join("app/target.py"),
        "LIMIT = 0\n\n\ndef limit():\n    return LIMIT\n",
    )?;
    Ok(())
}

/// One iteration's turns: look, edit (LIMIT = i → i + 1), summarize.
fn script() -> Script {
    let mut responses = Vec::new();
    for i in 0..ITERATIONS {
        responses.push(ScriptedResponse {
            tool_calls: vec![
                MockToolCall::new("search", json!({ "pattern": "LIMIT" })),
                MockToolCall::new("read_file", json!({ "path": "app/target.py" })),
            ],
            ..ScriptedResponse::text("")
        });
        responses.push(ScriptedResponse {
            tool_calls: vec![MockToolCall::new(
                "edit",
                json!({ "path": "app/target.py", "search": format!("LIMIT = {i}\n"), "replace": format!("LIMIT = {}\n", i + 1) }),
            )],
            ..ScriptedResponse::text("")
        });
        responses.push(ScriptedResponse::text("Raised the limit."));
    }
    Script::new(responses)
}

fn model_config(url: &str) -> Result<ModelConfig> {
    Ok(serde_json::from_value(json!({
        "provider": "openai", "base_url": format!("{url}/v1"), "model": "mock", "max_retries": 0
    }))?)
}

async fn bench() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root: PathBuf = tmp.path().join("ws");
    write_workspace(&root)?;
    let root = root.canonicalize()?;
    let index = WorkspaceIndex::new(IndexSettings::from_config(&Config::default().index));
    index.index_roots(
        std::slice::from_ref(&root),
        &|_: IndexProgress| {},
        &tokio_util::sync::CancellationToken::new(),
    );
    let index = Arc::new(index);

    // What the loop waits on, measured alone.
    let (model_rt, test_rt) = baselines(&root).await?;

    let mut per_iteration = Vec::new();
    for run in 0..RUNS {
        std::fs::write(
            root.join("app/target.py"),
            "LIMIT = 0\n\n\ndef limit():\n    return LIMIT\n",
        )?;
        let server = MockServer::start(script()).await?;
        let mut config = Config::default();
        config
            .models
            .insert("mock".into(), model_config(&server.url())?);
        let models = Models::from_config(&config);
        let agent = AgentConfig {
            max_iterations: ITERATIONS,
            max_tool_calls: 10_000,
            max_tokens: u64::MAX / 4,
            ..AgentConfig::default()
        };
        let mut spec = TaskSpec::from_config(
            format!("bench-{run}"),
            "raise the limit".into(),
            root.clone(),
            &agent,
        );
        spec.test_command = Some("false".into());
        let env = TaskEnv {
            model: models.get("mock")?,
            reviewer: None,
            host: Arc::new(Quiet),
            index: index.clone(),
            store: CheckpointStore::with_dir(tmp.path().join(format!("cache-{run}")), root.clone()),
        };
        let started = Instant::now();
        let result = run_task(spec, env, CancellationToken::new()).await;
        let wall = started.elapsed();
        assert_eq!(result.iterations, ITERATIONS, "{}", result.summary);
        assert_eq!(server.remaining(), 0);
        // Per iteration: 3 model turns and 1 test run, plus the baseline test run once.
        let waited = model_rt * 3 * ITERATIONS + test_rt * (ITERATIONS + 1);
        let overhead = wall.saturating_sub(waited) / ITERATIONS;
        println!(
            "run {run}: {ITERATIONS} iterations in {:.1} ms; model+tests {:.1} ms; loop overhead {:.2} ms/iteration",
            ms(wall),
            ms(waited),
            ms(overhead)
        );
        per_iteration.push(overhead);
    }
    per_iteration.sort();
    println!(
        "\nloop overhead per iteration (excluding model and test time): median {:.2} ms, min {:.2} ms, max {:.2} ms  ({FILES}-file workspace; model round trip {:.2} ms, `false` {:.2} ms)",
        ms(per_iteration[RUNS / 2]),
        ms(per_iteration[0]),
        ms(per_iteration[RUNS - 1]),
        ms(model_rt),
        ms(test_rt)
    );
    Ok(())
}

/// Mean time of one chat round trip to the mock (with a tool call in the
/// answer) and of one run of `false` through the sandboxed runner.
async fn baselines(root: &Path) -> Result<(Duration, Duration)> {
    const N: u32 = 100;
    let server = MockServer::start(Script::new(vec![ScriptedResponse {
        tool_calls: vec![MockToolCall::new(
            "read_file",
            json!({ "path": "app/target.py" }),
        )],
        repeat: true,
        ..ScriptedResponse::text("ok")
    }]))
    .await?;
    let mut config = Config::default();
    config
        .models
        .insert("mock".into(), model_config(&server.url())?);
    let model = Models::from_config(&config).get("mock")?;
    let request = ChatRequest {
        messages: vec![Message::user("x".repeat(20_000))],
        ..Default::default()
    };
    let started = Instant::now();
    for _ in 0..N {
        let mut stream = model.chat(request.clone());
        while let Some(event) = stream.next().await {
            event?;
        }
    }
    let model_rt = started.elapsed() / N;
    let spec = CommandSpec::new("false", root);
    let cancel = CancellationToken::new();
    let started = Instant::now();
    for _ in 0..N {
        exec::run(&spec, &cancel).await?;
    }
    let test_rt = started.elapsed() / N;
    Ok((model_rt, test_rt))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
