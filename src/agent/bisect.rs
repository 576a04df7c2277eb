//! Which commit broke the tests: a bisection of the workspace's git history
//! in a private clone, each step's tests run in the sandbox.
//!
//! The clone (`git clone --no-hardlinks --no-checkout`, in the task's copy area)
//! leaves the user's repository, index and work tree alone; every git
//! command runs in the sandbox too, with hooks and fsmonitor off, so a
//! hostile repository's configuration gets no more than its tests would.
//! The ignored entries of the workspace (virtualenvs, `node_modules`) are
//! linked into the clone after each checkout, Cargo's `target/` is the
//! copy area's own. "Passes" means the test command exits 0.
//!
//! The good end is the commit the user names (`--since REV`), or found by
//! walking back from HEAD (1, 2, 4 … 32 first-parent commits). The steps
//! between it and HEAD are bisected on the first-parent line; the first
//! commit that fails is named with its subject and diff. When HEAD itself
//! passes, the failure is in the uncommitted changes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agent::exec::{self, shell_quote, CommandSpec, Limits};
use crate::agent::isolated::CopyArea;
use crate::agent::sandbox::SandboxPolicy;

/// How far back the walk looks for a commit that passes.
const MAX_WALK: usize = 32;
/// The most of the first bad commit's diff kept.
const MAX_DIFF_BYTES: usize = 8 * 1024;
/// One git command's limit.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// What the bisection runs with.
pub struct BisectSettings<'a> {
    pub root: &'a Path,
    pub test_command: &'a str,
    pub test_timeout: Duration,
    pub allow_env: &'a [String],
    pub limits: Limits,
    pub sandbox: Option<&'a SandboxPolicy>,
    /// The commit known to pass; `None`: walk back to find one.
    pub since: Option<&'a str>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub sha: String,
    pub subject: String,
}

#[derive(Clone, Debug)]
pub enum BisectOutcome {
    /// `first_bad` is the first commit after `good` whose tests fail.
    Found {
        good: Commit,
        first_bad: Commit,
        /// `git show` of it, bounded.
        diff: String,
        /// Test runs it took.
        steps: u32,
    },
    /// HEAD passes: the failure is in the changes not committed.
    Uncommitted { head: Commit },
    /// No commit walked back to passes.
    NoGoodCommit { tried: usize },
}

/// A progress line for the user.
pub type Progress<'a> = &'a (dyn Fn(String) + Sync);

struct Checkout {
    dir: PathBuf,
    settings_root: PathBuf,
    target: PathBuf,
}

/// Bisects (see the module's text). `Err` says why it could not.
pub async fn bisect(
    settings: &BisectSettings<'_>,
    area: &CopyArea,
    progress: Progress<'_>,
    cancel: &CancellationToken,
) -> Result<BisectOutcome, String> {
    let dir = area.path().join("bisect");
    let target = area.path().join("cargo-target");
    std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
    let clone = Checkout {
        dir: dir.clone(),
        settings_root: settings.root.to_path_buf(),
        target,
    };
    let policy = settings
        .sandbox
        .map(|p| p.writing_elsewhere(settings.root, [area.path().to_path_buf()]));
    let git = |args: Vec<String>, cwd: PathBuf| {
        let policy = policy.clone();
        async move { run_git(&args, &cwd, policy, cancel).await }
    };
    // From inside the workspace (the sandbox keeps its working directory
    // visible, a workspace under /tmp included), into the area; the objects
    // copied, so later steps need nothing of the workspace.
    git(
        vec![
            "clone".into(),
            "--quiet".into(),
            "--no-hardlinks".into(),
            "--no-checkout".into(),
            "--".into(),
            ".".into(),
            dir.display().to_string(),
        ],
        settings.root.to_path_buf(),
    )
    .await
    .map_err(|e| {
        format!("the workspace is not a git repository's top folder, or git cannot read it: {e}")
    })?;
    let line = git(
        vec![
            "rev-list".into(),
            "--first-parent".into(),
            format!("--max-count={}", MAX_WALK + 1),
            "HEAD".into(),
        ],
        dir.clone(),
    )
    .await?;
    let history: Vec<String> = shas(&line);
    let Some(head) = history.first().cloned() else {
        return Err("the repository has no commits".to_owned());
    };
    let mut steps = 0u32;
    progress(format!("Bisect: testing HEAD ({})", short(&head)));
    steps += 1;
    if passes(&clone, settings, &policy, &head, cancel).await? {
        let head = describe(&git, &dir, &head).await;
        return Ok(BisectOutcome::Uncommitted { head });
    }
    let good = match settings.since {
        Some(rev) => {
            let out = git(
                vec![
                    "rev-parse".into(),
                    "--verify".into(),
                    "--quiet".into(),
                    format!("{rev}^{{commit}}"),
                ],
                dir.clone(),
            )
            .await
            .map_err(|_| format!("`{rev}` is not a commit of this repository"))?;
            let sha = shas(&out)
                .into_iter()
                .next()
                .ok_or_else(|| format!("`{rev}` is not a commit of this repository"))?;
            progress(format!("Bisect: testing {rev} ({})", short(&sha)));
            steps += 1;
            if !passes(&clone, settings, &policy, &sha, cancel).await? {
                return Err(format!(
                    "the tests fail at {rev} too: name an earlier commit where they pass"
                ));
            }
            sha
        }
        None => {
            let mut found = None;
            let mut tried = 0;
            for back in walk_back(history.len()) {
                let sha = &history[back];
                progress(format!(
                    "Bisect: looking for a commit that passes: HEAD~{back} ({})",
                    short(sha)
                ));
                steps += 1;
                tried += 1;
                if passes(&clone, settings, &policy, sha, cancel).await? {
                    found = Some(sha.clone());
                    break;
                }
            }
            match found {
                Some(sha) => sha,
                None => return Ok(BisectOutcome::NoGoodCommit { tried }),
            }
        }
    };
    let out = git(
        vec![
            "rev-list".into(),
            "--first-parent".into(),
            "--reverse".into(),
            format!("{good}..{head}"),
        ],
        dir.clone(),
    )
    .await?;
    let line_of_commits = shas(&out);
    // Invariant: `lo` passes (-1 is `good`), `hi` fails (HEAD is last).
    let (mut lo, mut hi) = (-1i64, line_of_commits.len() as i64 - 1);
    if hi < 0 {
        return Err(format!(
            "{} is not an ancestor of HEAD on its first-parent line",
            short(&good)
        ));
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let sha = &line_of_commits[mid as usize];
        progress(format!(
            "Bisect: {} commit(s) left; testing {}",
            hi - lo - 1,
            short(sha)
        ));
        steps += 1;
        if passes(&clone, settings, &policy, sha, cancel).await? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let bad_sha = line_of_commits[hi as usize].clone();
    let diff = git(
        vec![
            "show".into(),
            "--no-color".into(),
            "--no-ext-diff".into(),
            "--format=commit %H%n%s%n".into(),
            bad_sha.clone(),
        ],
        dir.clone(),
    )
    .await
    .unwrap_or_default();
    Ok(BisectOutcome::Found {
        good: describe(&git, &dir, &good).await,
        first_bad: describe(&git, &dir, &bad_sha).await,
        diff: crate::agent::output::head_tail(&diff, MAX_DIFF_BYTES, 300),
        steps,
    })
}

/// A commit's subject beside its sha.
async fn describe<F, Fut>(git: &F, dir: &Path, sha: &str) -> Commit
where
    F: Fn(Vec<String>, PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let subject = git(
        vec![
            "log".into(),
            "-1".into(),
            "--format=%s".into(),
            sha.to_owned(),
        ],
        dir.to_path_buf(),
    )
    .await
    .map(|s| s.trim().to_owned())
    .unwrap_or_default();
    Commit {
        sha: sha.to_owned(),
        subject,
    }
}

/// Checks `sha` out in the clone, links the ignored entries, runs the tests.
async fn passes(
    clone: &Checkout,
    settings: &BisectSettings<'_>,
    policy: &Option<SandboxPolicy>,
    sha: &str,
    cancel: &CancellationToken,
) -> Result<bool, String> {
    for args in [
        vec!["checkout", "--quiet", "--force", "--detach", sha],
        vec!["clean", "--quiet", "-d", "-f", "-x"],
    ] {
        run_git(
            &args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            &clone.dir,
            policy.clone(),
            cancel,
        )
        .await?;
    }
    link_ignored(clone).map_err(|e| format!("cannot prepare the clone: {e}"))?;
    let spec = CommandSpec {
        command: settings.test_command.to_owned(),
        cwd: clone.dir.clone(),
        timeout: settings.test_timeout,
        max_output_bytes: 64 * 1024,
        max_output_lines: 1000,
        env_allow: settings.allow_env.to_vec(),
        limits: settings.limits,
        sandbox: policy.clone(),
    };
    let outcome = exec::run(&spec, cancel).await.map_err(|e| e.to_string())?;
    if cancel.is_cancelled() {
        return Err("cancelled".to_owned());
    }
    Ok(outcome.success())
}

/// The workspace's top-level entries its `.gitignore` ignores and the
/// checkout lacks (virtualenvs, `node_modules`), linked; Cargo's `target/`
/// is the area's. Files the history tracks are never linked in from the
/// present.
fn link_ignored(clone: &Checkout) -> std::io::Result<()> {
    let mut builder = ignore::gitignore::GitignoreBuilder::new(&clone.settings_root);
    let gitignore = clone.settings_root.join(".gitignore");
    if crate::fsread::read_regular(&gitignore, 1024 * 1024).is_ok() {
        builder.add(&gitignore);
    }
    let ignored = builder.build().map_err(std::io::Error::other)?;
    for entry in std::fs::read_dir(&clone.settings_root)?.flatten() {
        let name = entry.file_name();
        let to = clone.dir.join(&name);
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if name == ".git"
            || std::fs::symlink_metadata(&to).is_ok()
            || !ignored.matched(entry.path(), is_dir).is_ignore()
        {
            continue;
        }
        let from = match name == "target" {
            true => clone.target.clone(),
            false => entry.path(),
        };
        std::os::unix::fs::symlink(from, to)?;
    }
    Ok(())
}

async fn run_git(
    args: &[String],
    cwd: &Path,
    policy: Option<SandboxPolicy>,
    cancel: &CancellationToken,
) -> Result<String, String> {
    // Hooks and fsmonitor would run the repository's own programs; the
    // environment must not point git at another repository.
    let mut command = "env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE -u GIT_CONFIG_PARAMETERS git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.file.allow=always".to_owned();
    for arg in args {
        command.push(' ');
        command.push_str(&shell_quote(arg));
    }
    let spec = CommandSpec {
        command,
        cwd: cwd.to_path_buf(),
        timeout: GIT_TIMEOUT,
        max_output_bytes: 256 * 1024,
        max_output_lines: 20_000,
        env_allow: Vec::new(),
        limits: Limits::default(),
        sandbox: policy,
    };
    let outcome = exec::run(&spec, cancel).await.map_err(|e| e.to_string())?;
    if !outcome.success() {
        let first = args.first().map(String::as_str).unwrap_or("");
        return Err(format!(
            "git {first} failed: {}",
            outcome.output.lines().last().unwrap_or("").trim()
        ));
    }
    Ok(outcome.output)
}

/// How far back from HEAD each try of the walk looks: 1, 2, 4 … and the
/// oldest commit of the `len` known when doubling passes it.
fn walk_back(len: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut back = 1;
    while back < len {
        out.push(back);
        back *= 2;
    }
    if len > 1 && out.last() != Some(&(len - 1)) {
        out.push(len - 1);
    }
    out
}

/// The full shas in git's output, in order.
fn shas(output: &str) -> Vec<String> {
    output
        .lines()
        .map(str::trim)
        .filter(|l| l.len() == 40 && l.chars().all(|c| c.is_ascii_hexdigit()))
        .map(str::to_owned)
        .collect()
}

fn short(sha: &str) -> &str {
    sha.get(..10).unwrap_or(sha)
}

/// What the model is told of the outcome.
pub fn for_model(outcome: &BisectOutcome) -> String {
    match outcome {
        BisectOutcome::Found {
            good,
            first_bad,
            diff,
            steps,
        } => format!(
            "A bisection of the git history ({steps} test runs) found the commit that broke the tests: {} \"{}\" (they pass at {} \"{}\"). Its change:\n{diff}\nThe bug is most likely in what this commit changed.",
            short(&first_bad.sha),
            first_bad.subject,
            short(&good.sha),
            good.subject
        ),
        BisectOutcome::Uncommitted { head } => format!(
            "The tests pass at the last commit ({} \"{}\"): the failure comes from the changes not committed yet.",
            short(&head.sha),
            head.subject
        ),
        BisectOutcome::NoGoodCommit { tried } => format!(
            "No earlier commit passes the tests ({tried} tried, walking back from HEAD): the failure is old."
        ),
    }
}

/// The outcome as JSON (for the task result).
pub fn to_json(outcome: &BisectOutcome) -> serde_json::Value {
    match outcome {
        BisectOutcome::Found {
            good,
            first_bad,
            steps,
            ..
        } => serde_json::json!({
            "firstBad": first_bad.sha, "subject": first_bad.subject,
            "good": good.sha, "steps": steps,
        }),
        BisectOutcome::Uncommitted { head } => {
            serde_json::json!({ "uncommitted": true, "head": head.sha })
        }
        BisectOutcome::NoGoodCommit { tried } => {
            serde_json::json!({ "noGoodCommit": true, "tried": tried })
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_walk_doubles_then_tries_the_oldest() {
        assert_eq!(super::walk_back(1), Vec::<usize>::new());
        assert_eq!(super::walk_back(4), [1, 2, 3]);
        assert_eq!(super::walk_back(5), [1, 2, 4]);
        assert_eq!(super::walk_back(33), [1, 2, 4, 8, 16, 32]);
    }
}
