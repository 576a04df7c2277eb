//! `go test` output: `--- FAIL:` lines, `file_test.go:12: message` lines
//! (relative to the package), panics with goroutine traces, package
//! `ok`/`FAIL` lines and build errors.

use std::path::Path;

use super::{frames_in_line_under, num, patterns};
use crate::agent::verify::report::Builder;

patterns!(Re {
    fail = r"^\s*--- FAIL: (\S+)",
    pass = r"^\s*--- PASS: ",
    run = r"^=== RUN\s+(\S+)",
    // `    x_test.go:12: message` (t.Error / t.Fatal).
    test_log = r"^\s+(\w[\w.-]*\.go):(\d+): (.*)$",
    panic = r"^panic: (.+?)(?: \[recovered\])?$",
    // `\t/abs/pkg/x.go:12 +0x18` in a goroutine trace.
    trace = r"^\t(\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?$",
    package = r"^(?:FAIL|ok)\s+(\S+)(?:\s+(\[build failed\]|\[setup failed\]))?",
    build_error = r"^(\S+\.go):(\d+):(\d+): (.+)$",
});

pub(super) fn parse(output: &str, b: &mut Builder, root: &Path) -> Option<()> {
    let re = Re::get()?;
    let module = module_path(root);
    let mut current_test: Option<String> = None;
    // `x_test.go:12` names a file of the package whose `FAIL pkg` line
    // comes later: hold those until then.
    let mut pending: Vec<(String, u32)> = Vec::new();
    let mut fails = 0u32;
    let mut passes = 0u32;
    let mut build_errors = 0u32;
    for line in output.lines() {
        if let Some(c) = re.fail.captures(line) {
            fails += 1;
            b.failing(&c[1]);
            current_test = Some(c[1].to_string());
        } else if re.pass.is_match(line) {
            passes += 1;
        } else if let Some(c) = re.run.captures(line) {
            current_test = Some(c[1].to_string());
        } else if let Some(c) = re.test_log.captures(line) {
            pending.push((c[1].to_string(), num(&c[2])));
            let text = format!("{}:{}: {}", &c[1], &c[2], &c[3]);
            match &current_test {
                Some(test) => b.message(&format!("{test}: {text}")),
                None => b.message(&text),
            }
        } else if let Some(c) = re.panic.captures(line) {
            let text = format!("panic: {}", &c[1]);
            match &current_test {
                Some(test) => b.message(&format!("{test}: {text}")),
                None => b.message(&text),
            }
        } else if let Some(c) = re.trace.captures(line) {
            b.frame(&c[1], num(&c[2]), None);
        } else if let Some(c) = re.package.captures(line) {
            let dir = package_dir(module.as_deref(), &c[1]);
            for (file, n) in pending.drain(..) {
                b.frame_in(dir.as_deref(), &file, n, None);
            }
            if c.get(2).is_some() {
                b.report.build_failed = true;
            }
            current_test = None;
        } else if let Some(c) = re.build_error.captures(line) {
            build_errors += 1;
            b.message(line);
            frames_in_line_under(None, &format!(" {}:{}:{}", &c[1], &c[2], &c[3]), b);
        }
    }
    // Output cut before its package line: resolve by file name alone.
    for (file, n) in pending {
        b.frame(&file, n, None);
    }
    if fails > 0 || build_errors > 0 {
        b.add_failed(if fails > 0 { fails } else { build_errors });
    }
    // Without -v, go prints no line per passing test: the count is unknown.
    if passes > 0 {
        b.add_passed(passes);
    }
    Some(())
}

/// The `module` line of `root/go.mod`.
fn module_path(root: &Path) -> Option<String> {
    // The workspace's file: regular files only, capped.
    let text = crate::fsread::read_regular_to_string(
        &root.join("go.mod"),
        crate::fsread::CONFIG_MAX_BYTES,
    )
    .ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("module "))
        .map(|m| m.trim().trim_matches('"').to_string())
}

/// A package's folder relative to the root, from its import path.
fn package_dir(module: Option<&str>, package: &str) -> Option<String> {
    let module = module?;
    if package == module {
        return Some(String::new());
    }
    package
        .strip_prefix(module)?
        .strip_prefix('/')
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_compile() {
        assert!(super::Re::get().is_some());
    }
}
