//! Asked to make the tests pass, the task may not rewrite the tests that
//! fail: in the files holding them every existing line stays (new tests
//! may be added), unless the goal names the file. A small model otherwise
//! edits the expected value — Qwen2.5-Coder-1.5B turned
//! `assert median([4, 1, 3, 2]) == 2.5` into `== 3.5`, and the task
//! reported success. Nor are those files shown as the code to fix.

use super::check::Verification;
use super::Task;

impl Task {
    /// Keeps the test files behind `baseline`'s failures (those that exist
    /// and that the goal does not name) and says so.
    pub(super) fn keep_failing_tests(&mut self, baseline: &Verification) {
        if baseline.passed {
            return;
        }
        let Some(report) = &baseline.report else {
            return;
        };
        let goal = self.spec.goal.to_lowercase();
        let files: Vec<String> = report
            .failing_test_files()
            .into_iter()
            .filter(|file| {
                let name = file.rsplit('/').next().unwrap_or(file);
                !goal.contains(&name.to_lowercase())
            })
            .filter(|file| self.files.root().join(file).is_file())
            .collect();
        if files.is_empty() {
            return;
        }
        self.files.tests_kept = files.iter().map(|f| self.files.root().join(f)).collect();
        self.status(&format!(
            "Kept as they are: the failing tests in {} (the fix goes in the code they test; new tests may be added; name the file in the goal to let the task change its tests)",
            files.join(", ")
        ));
    }
}

/// The first line of `old` that `new` no longer has in the same order
/// (blank lines and trailing whitespace aside): `None` when `new` only
/// adds lines.
pub(super) fn first_line_not_kept<'a>(old: &'a str, new: &str) -> Option<&'a str> {
    let mut new_lines = new.lines().map(str::trim_end);
    old.lines()
        .filter(|line| !line.trim().is_empty())
        .find(|line| {
            let line = line.trim_end();
            !new_lines.any(|n| n == line)
        })
}

#[cfg(test)]
mod tests {
    use super::first_line_not_kept;

    #[test]
    fn only_added_lines_keep_a_test_file() {
        let old = "from stats import median\n\n\ndef test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n";
        let added = "from stats import median\nimport pytest\n\n\ndef test_even():\n    assert median([4, 1, 3, 2]) == 2.5\n\n\ndef test_one():\n    assert median([7]) == 7\n";
        assert_eq!(first_line_not_kept(old, added), None);
        assert_eq!(first_line_not_kept(old, &old.replace('\n', "  \n")), None);
        let weakened = old.replace("== 2.5", "== 3.5");
        assert_eq!(
            first_line_not_kept(old, &weakened),
            Some("    assert median([4, 1, 3, 2]) == 2.5")
        );
        let removed = "from stats import median\n";
        assert_eq!(first_line_not_kept(old, removed), Some("def test_even():"));
        // Reordered: a line moved above another is not kept in order.
        let swapped =
            "def test_even():\n    assert median([4, 1, 3, 2]) == 2.5\nfrom stats import median\n";
        assert!(first_line_not_kept(old, swapped).is_some());
    }
}
