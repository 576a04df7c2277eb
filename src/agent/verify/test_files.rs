//! Which workspace files hold the failing tests: the files pytest-style
//! test ids name (`tests/test_x.py::test_y`) and the locations the output
//! points at, kept only when they are test files by the usual conventions
//! (a Rust unit test lives beside the code it tests: that file is never
//! one).

use super::TestReport;

impl TestReport {
    /// Root-relative test files that hold the failing tests, in order of
    /// appearance, each once.
    pub fn failing_test_files(&self) -> Vec<String> {
        let from_ids = self
            .failing_tests
            .iter()
            .filter_map(|id| id.split_once("::").map(|(file, _)| file.trim()));
        let from_frames = self.frames.iter().map(|f| f.path.as_str());
        let mut out: Vec<String> = Vec::new();
        for file in from_ids.chain(from_frames) {
            if is_test_file(file) && !out.iter().any(|f| f == file) {
                out.push(file.to_owned());
            }
        }
        out
    }
}

/// A file that holds tests by its name or directory: `test_x.py`,
/// `x_test.py`, `tests.py`, `x_test.go`, `x.test.ts`, `x.spec.js`,
/// `x_spec.rb`, `XTest.java`, or anything under `tests/`, `test/`,
/// `__tests__/` or `spec/`.
pub fn is_test_file(path: &str) -> bool {
    let path = path.replace('\\', "/");
    let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let Some(name) = parts.pop() else {
        return false;
    };
    if parts
        .iter()
        .any(|d| matches!(*d, "tests" | "test" | "__tests__" | "spec"))
    {
        return true;
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    match ext {
        "py" => stem.starts_with("test_") || stem.ends_with("_test") || stem == "tests",
        "go" => stem.ends_with("_test"),
        "rb" => stem.ends_with("_test") || stem.ends_with("_spec"),
        "java" | "kt" | "cs" => stem.ends_with("Test") || stem.ends_with("Tests"),
        "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs" => {
            stem.ends_with(".test") || stem.ends_with(".spec")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::verify::Frame;

    #[test]
    fn test_files_by_name_and_directory_and_code_files_not() {
        for yes in [
            "test_stats.py",
            "pkg/stats_test.py",
            "app/tests.py",
            "tests/integration.rs",
            "src/__tests__/sum.js",
            "sum.test.ts",
            "sum.spec.js",
            "sum_test.go",
            "user_spec.rb",
            "src/test/java/SumTest.java",
        ] {
            assert!(is_test_file(yes), "{yes}");
        }
        for no in [
            "stats.py",
            "src/lib.rs",
            "testing.py",
            "contest.py",
            "sum.ts",
            "latest_results.go",
            "Makefile",
        ] {
            assert!(!is_test_file(no), "{no}");
        }
    }

    #[test]
    fn failing_test_files_come_from_test_ids_and_frames_once_each() {
        let report = TestReport {
            failing_tests: vec![
                "test_stats.py::test_median_even".into(),
                "test_stats.py::test_mean[1-2]".into(),
                "tests::adds_two".into(),
            ],
            frames: vec![
                Frame {
                    path: "stats.py".into(),
                    line: 9,
                    column: None,
                },
                Frame {
                    path: "tests/test_more.py".into(),
                    line: 3,
                    column: None,
                },
                Frame {
                    path: "test_stats.py".into(),
                    line: 12,
                    column: None,
                },
            ],
            ..TestReport::default()
        };
        assert_eq!(
            report.failing_test_files(),
            ["test_stats.py", "tests/test_more.py"]
        );
    }
}
