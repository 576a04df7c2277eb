//! Rust's side of the traced run: the crate's tests built once more with
//! `-C instrument-coverage` (into a target folder of their own, so the
//! user's builds are not invalidated), each test run in a process of its
//! own, and the functions each ran read back with the toolchain's own
//! `llvm-profdata` and `llvm-cov` (rustup's `llvm-tools`: a profile is read
//! only by the LLVM that wrote it). Without them, or for a test command
//! that is not a plain `cargo test`, the static call path is all there is.
//! Everything runs inside the sandboxed script; Fettle reads only the text
//! it leaves, with size bounds, in the Python tracer's format.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::read_bounded;

/// Tests run one by one at most (each is a process and a profile read).
const MAX_TESTS: usize = 2000;
/// Instrumented target folders kept (one per project); the oldest go.
const MAX_TARGETS: usize = 4;

/// `cargo test` and its options, when `command` is a plain `cargo test`
/// (no shell syntax): what the script builds with `--no-run`. Arguments
/// after `--` (the test binaries' own) and test-name filters are left out:
/// every test is traced.
pub(super) fn cargo_test(command: &str) -> Option<String> {
    if command.chars().any(|c| {
        matches!(
            c,
            ';' | '&' | '|' | '<' | '>' | '$' | '`' | '\n' | '(' | ')'
        )
    }) {
        return None;
    }
    let mut words = command.split_whitespace();
    if words.next()? != "cargo" {
        return None;
    }
    let mut kept = vec!["cargo".to_owned()];
    let mut seen_test = false;
    // What the option before took: its value kept, or dropped with it.
    let mut value: Option<bool> = None;
    for word in words {
        if word == "--" {
            break;
        }
        if !seen_test {
            match word {
                "test" => seen_test = true,
                // `cargo +nightly test`.
                w if w.starts_with('+') => {}
                _ => return None,
            }
            kept.push(match word {
                "test" => word.to_owned(),
                toolchain => super::shell_quote(toolchain),
            });
            continue;
        }
        if let Some(keep) = value.take() {
            if keep {
                kept.push(super::shell_quote(word));
            }
            continue;
        }
        if !word.starts_with('-') {
            // A test-name filter: dropped (see above).
            continue;
        }
        let name = word.split('=').next().unwrap_or(word);
        let inline_value = word.contains('=');
        // The script's own: where it builds, what it prints, no run.
        if matches!(name, "--target-dir" | "--message-format") {
            value = (!inline_value).then_some(false);
            continue;
        }
        if matches!(word, "--no-run" | "--doc" | "-q" | "--quiet") {
            continue;
        }
        // Options of `cargo test` that take a separate value.
        if !inline_value
            && matches!(
                word,
                "-p" | "--package"
                    | "--features"
                    | "-F"
                    | "--test"
                    | "--bin"
                    | "--example"
                    | "--bench"
                    | "--exclude"
                    | "--manifest-path"
                    | "--target"
                    | "-j"
                    | "--jobs"
                    | "--profile"
                    | "--config"
                    | "-Z"
                    | "--color"
                    | "--lockfile-path"
            )
        {
            value = Some(true);
        }
        kept.push(super::shell_quote(word));
    }
    seen_test.then(|| kept.join(" "))
}

/// Where the instrumented builds of the project at `real_root` go; old
/// projects' folders are removed so at most [`MAX_TARGETS`] stay.
pub(super) fn target_dir(real_root: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let parent = crate::agent::checkpoint::cache_dir()
        .join("coverage")
        .join("cargo");
    let key = format!(
        "{:x}",
        Sha256::digest(real_root.display().to_string().as_bytes())
    );
    let dir = parent.join(&key[..16]);
    if let Ok(entries) = std::fs::read_dir(&parent) {
        let mut others: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path() != dir)
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if others.len() >= MAX_TARGETS {
            others.sort();
            for (_, path) in others.iter().take(others.len() + 1 - MAX_TARGETS) {
                let _ = std::fs::remove_dir_all(path);
            }
        }
    }
    dir
}

/// The script the sandbox runs: find the toolchain's LLVM tools, build the
/// tests instrumented, run each test alone and keep the functions it ran.
pub(super) fn script(cargo_test: &str, out: &Path, target: &Path) -> String {
    let q = |p: &Path| super::shell_quote(&p.display().to_string());
    format!(
        r#"out={out}
sysroot=$(rustc --print sysroot 2>/dev/null) || {{ echo "rustc not found" > "$out/rust-none"; exit 0; }}
host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')
tools="$sysroot/lib/rustlib/$host/bin"
if [ ! -x "$tools/llvm-profdata" ] || [ ! -x "$tools/llvm-cov" ]; then
  echo "no llvm-tools in the toolchain (rustup component add llvm-tools)" > "$out/rust-none"; exit 0
fi
mkdir -p "$out/prof" "$out/ran" {target}
export CARGO_TARGET_DIR={target}
export RUSTFLAGS="-C instrument-coverage${{RUSTFLAGS:+ $RUSTFLAGS}}"
export LLVM_PROFILE_FILE="$out/prof/build-%p-%m.profraw"
if ! {cargo_test} --no-run --message-format=json > "$out/build.jsonl" 2> "$out/build.err"; then
  echo "the instrumented build failed: $(tail -n 3 "$out/build.err" | tr '\n' ' ')" > "$out/rust-none"; exit 0
fi
grep '"reason":"compiler-artifact"' "$out/build.jsonl" | grep '"test":true' \
  | sed -n 's/.*"manifest_path":"\([^"]*\)".*"executable":"\([^"]*\)".*/\1\t\2/p' > "$out/executables.tsv"
tab=$(printf '\t')
# Tests run side by side, as many as the cores (cargo runs them on threads).
jobs=$(nproc 2>/dev/null || echo 2)
running=0
n=0
while IFS="$tab" read -r manifest exe; do
  dir=$(dirname "$manifest")
  ( cd "$dir" && "$exe" --list --format terse < /dev/null 2>/dev/null ) | sed -n 's/: test$//p' > "$out/list.txt"
  while IFS= read -r name; do
    n=$((n + 1))
    [ "$n" -gt {max_tests} ] && break 2
    (
      profile="$out/prof/t$n.profraw"
      ( cd "$dir" && CARGO_MANIFEST_DIR="$dir" LLVM_PROFILE_FILE="$profile" "$exe" --exact "$name" --test-threads=1 -q < /dev/null > /dev/null 2>&1 )
      status=$?
      # The functions with a count: their (mangled) names.
      "$tools/llvm-profdata" show --all-functions --counts "$profile" 2>/dev/null | awk '
        /^  [^ ].*:$/ {{ name = substr($0, 3, length($0) - 3); next }}
        /Function count:/ {{ if ($3 + 0 > 0) {{ print name; name = "" }} ; next }}
        /Block counts:/ {{ if (name != "" && $0 ~ /[1-9]/) print name; name = "" }}' > "$out/ran/t$n.txt"
      printf '%s\t%s\t%s\n' "$n" "$status" "$name" >> "$out/rust-tests.tsv"
    ) < /dev/null &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait; running=0; fi
  done < "$out/list.txt"
done < "$out/executables.tsv"
wait
# Where each function is: one export of every test binary's map.
for profile in "$out"/prof/t*.profraw; do
  [ -e "$profile" ] && printf '%s\n' "$profile"
done > "$out/profiles.txt"
set --
while IFS="$tab" read -r manifest exe; do
  if [ $# -eq 0 ]; then set -- "$exe"; else set -- "$@" -object "$exe"; fi
done < "$out/executables.tsv"
if [ -s "$out/profiles.txt" ] && [ $# -gt 0 ]; then
  "$tools/llvm-profdata" merge -sparse -f "$out/profiles.txt" -o "$out/all.profdata" 2>/dev/null \
    && "$tools/llvm-cov" export -format=lcov -instr-profile "$out/all.profdata" "$@" 2>/dev/null \
    | grep -E '^(SF:|FN:)' > "$out/functions.lcov"
fi
rm -rf "$out/prof" "$out/all.profdata"
"#,
        out = q(out),
        target = q(target),
        max_tests = MAX_TESTS,
    )
}

/// Why the script recorded nothing, if it said.
pub(super) fn why_none(out: &Path) -> Option<String> {
    read_bounded(&out.join("rust-none")).map(|s| s.trim().to_owned())
}

/// Reads `out/rust-tests.tsv`, `out/ran/` and `out/functions.lcov`;
/// writes `out/spectrum-rust.json`: each function is one entry at its
/// first line (named "": it belongs to the function around that line —
/// a closure to its function).
pub(super) fn convert(out: &Path, real_root: &Path) {
    let (Some(tests_tsv), Some(lcov)) = (
        read_bounded(&out.join("rust-tests.tsv")),
        read_bounded(&out.join("functions.lcov")),
    ) else {
        return;
    };
    // Mangled name → where it starts, for the workspace's files.
    let mut places: HashMap<&str, (&str, u32)> = HashMap::new();
    let mut file: Option<&str> = None;
    for line in lcov.lines() {
        if let Some(path) = line.strip_prefix("SF:") {
            file = Path::new(path).starts_with(real_root).then_some(path);
        } else if let (Some(path), Some(function)) = (file, line.strip_prefix("FN:")) {
            let Some((number, name)) = function.split_once(',') else {
                continue;
            };
            if let Ok(number) = number.parse::<u32>() {
                places.insert(name, (path, number));
            }
        }
    }
    let mut entries: Vec<(String, u32, String)> = Vec::new();
    let mut index: HashMap<(&str, u32), usize> = HashMap::new();
    let mut tests: Vec<serde_json::Value> = Vec::new();
    for row in tests_tsv.lines().take(MAX_TESTS) {
        let mut cells = row.splitn(3, '\t');
        let (Some(n), Some(status), Some(name)) = (cells.next(), cells.next(), cells.next()) else {
            continue;
        };
        // A digit string only: it names a file below.
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Some(ran_names) = read_bounded(&out.join("ran").join(format!("t{n}.txt"))) else {
            continue;
        };
        let mut ran: Vec<usize> = ran_names
            .lines()
            .filter_map(|function| places.get(function))
            .map(|&(path, number)| {
                *index.entry((path, number)).or_insert_with(|| {
                    entries.push((path.to_owned(), number, String::new()));
                    entries.len() - 1
                })
            })
            .collect();
        ran.sort_unstable();
        ran.dedup();
        tests.push(serde_json::json!({
            "id": name,
            "failed": status.trim() != "0",
            "functions": ran,
        }));
    }
    super::write_converted(out, "rust", tests, entries);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // in tests a panic is the failure report
    use super::{cargo_test, convert};

    #[test]
    fn the_functions_each_test_ran_become_entries_at_their_first_line() {
        let out = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("src/lib.rs");
        let dir = out.path();
        std::fs::create_dir(dir.join("ran")).unwrap();
        std::fs::write(
            dir.join("functions.lcov"),
            format!(
                "SF:{lib}\nFN:9,_RNvCs1_6fields5plain\nFN:13,_RNvCs1_6fields5quote\n\
                 FN:14,_RNCNvCs1_6fields5quote0B3_\nSF:/elsewhere/core.rs\nFN:1,_RNvCs2_4core3fmt\n",
                lib = lib.display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("rust-tests.tsv"),
            "1\t0\tplain_fields_are_joined\n2\t101\ta_field_with_a_comma_is_quoted\n\
             ../3\t101\tnot a test\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("ran/t1.txt"),
            "_RNvCs1_6fields5plain\n_RNvCs2_4core3fmt\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("ran/t2.txt"),
            "_RNvCs1_6fields5plain\n_RNvCs1_6fields5quote\n_RNCNvCs1_6fields5quote0B3_\nunknown\n",
        )
        .unwrap();
        convert(dir, root.path());
        let data: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("spectrum-rust.json")).unwrap())
                .unwrap();
        let lib = lib.display().to_string();
        // Outside the workspace (core's) and unknown names: no entry.
        assert_eq!(
            data["functions"],
            serde_json::json!([[lib, 9, ""], [lib, 13, ""], [lib, 14, ""]])
        );
        assert_eq!(
            data["tests"],
            serde_json::json!([
                {"id": "plain_fields_are_joined", "failed": false, "functions": [0]},
                {"id": "a_field_with_a_comma_is_quoted", "failed": true, "functions": [0, 1, 2]},
            ])
        );
    }

    #[test]
    fn only_a_plain_cargo_test_is_rebuilt_instrumented() {
        assert_eq!(cargo_test("cargo test").as_deref(), Some("cargo test"));
        assert_eq!(
            cargo_test("cargo test -q --features serde parse -- --nocapture").as_deref(),
            Some("cargo test '--features' 'serde'")
        );
        assert_eq!(
            cargo_test("cargo +nightly test -p core").as_deref(),
            Some("cargo '+nightly' test '-p' 'core'")
        );
        // The script builds where it chooses and reads JSON.
        assert_eq!(
            cargo_test("cargo test --target-dir /tmp/t --message-format short --release")
                .as_deref(),
            Some("cargo test '--release'")
        );
        assert_eq!(
            cargo_test("cargo test --target-dir=/tmp/t -Z unstable-options").as_deref(),
            Some("cargo test '-Z' 'unstable-options'")
        );
        assert_eq!(cargo_test("cargo build"), None);
        assert_eq!(cargo_test("cargo test && rm -rf /"), None);
        assert_eq!(cargo_test("cargo test $(evil)"), None);
        assert_eq!(cargo_test("pytest -q"), None);
    }
}
