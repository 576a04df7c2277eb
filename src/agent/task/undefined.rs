//! Names a changed Python file uses and never imports, as the checkers
//! report them undefined, get their import: the 1.5B's tests called `gcd`
//! and never imported it; its `breadth_first_search` built a `deque()` in a
//! file that imports it only as `from collections import deque as Queue`
//! (three attempts of eight lost to the `NameError`, in a QuixBugs run).
//! A name gets an import when there is exactly one to give: the original
//! of an alias the file already imports (`from collections import deque`,
//! `import numpy` for `import numpy as np`), or else the one module of the
//! project that defines it (not the file itself).

use serde_json::json;

use super::check::Verification;
use super::explain::StopCause;
use super::Task;
use crate::agent::checkers::Severity;
use crate::agent::edit::{past_newline, python_preamble_end, python_top_level};
use crate::agent::verify::is_test_file;
use crate::model::ToolCall;

/// Which changed files get their missing imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// The tests written first.
    Tests,
    /// The code an attempt changed (test files are the user's to change).
    Code,
}

/// The name a checker reports undefined: ruff's "Undefined name `gcd`",
/// pyflakes' "undefined name 'gcd'".
fn undefined_name(message: &str) -> Option<String> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("undefined name")? + "undefined name".len();
    let name: String = message[at..]
        .trim_start()
        .trim_start_matches(['`', '\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Where new imports go in Python `text` (a byte offset at a line's
/// start): after its last top-level import, so they follow `from
/// __future__` and stay beside the others; in a file without one, after
/// its opening comments and module docstring, which must stay first to
/// stay the docstring. Read from the syntax tree: an import a docstring
/// quotes is no import.
fn import_offset(text: &str) -> (usize, bool) {
    match python_top_level(text).last() {
        Some(last) => (past_newline(text, last.end), true),
        None => (python_preamble_end(text), false),
    }
}

/// `text` with `imports` added where they belong (see `import_offset`):
/// one a line beside the file's imports, else set apart from the code.
pub(super) fn with_imports<S: AsRef<str>>(imports: &[S], text: &str) -> String {
    if imports.is_empty() {
        return text.to_owned();
    }
    let added = imports
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<&str>>()
        .join("\n");
    let (at, beside_imports) = import_offset(text);
    let (head, tail) = text.split_at(at);
    // A last line without its newline gets one.
    let newline = match head.is_empty() || head.ends_with('\n') {
        true => "",
        false => "\n",
    };
    if beside_imports {
        return format!("{head}{newline}{added}\n{tail}");
    }
    let code = tail.trim_start_matches('\n');
    match head.trim().is_empty() {
        true => format!("{added}\n\n\n{code}"),
        false => format!("{head}{newline}\n{added}\n\n\n{code}"),
    }
}

/// The top-level import statements of Python `text`, each on one line
/// (a parenthesized or continued one joined, comments dropped).
fn import_statements(text: &str) -> Vec<String> {
    python_top_level(text)
        .into_iter()
        .map(|range| {
            text[range]
                .lines()
                .map(|line| line.split('#').next().unwrap_or("").trim_end_matches('\\'))
                .flat_map(str::split_whitespace)
                .collect::<Vec<&str>>()
                .join(" ")
        })
        .collect()
}

/// The import that binds `name` where the file binds only an alias of it:
/// `from m import name as other` → `from m import name`; `import name as
/// n` or `import name.sub as s` → `import name`.
fn unaliased_import(text: &str, name: &str) -> Option<String> {
    for statement in import_statements(text) {
        let (module, names) = match statement.strip_prefix("from ") {
            Some(rest) => {
                let Some((module, names)) = rest.split_once(" import ") else {
                    continue;
                };
                (Some(module.trim()), names)
            }
            None => match statement.strip_prefix("import ") {
                Some(names) => (None, names),
                None => continue,
            },
        };
        let names = names.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace());
        for item in names.split(',') {
            let Some((original, _alias)) = item.trim().split_once(" as ") else {
                continue;
            };
            let original = original.trim();
            match module {
                Some(module) if original == name => {
                    return Some(format!("from {module} import {name}"))
                }
                None if original.split('.').next() == Some(name) => {
                    return Some(format!("import {name}"))
                }
                _ => {}
            }
        }
    }
    None
}

impl Task {
    /// The project's Python modules (not its tests) that define `name`, as
    /// an import names them (`pkg/util.py` → `pkg.util`), sorted, each once.
    pub(super) fn python_modules_defining(&self, name: &str) -> Vec<String> {
        let mut modules: Vec<String> = self
            .index
            .definitions(name)
            .into_iter()
            .map(|d| self.files.paths.relative(&d.path))
            .filter(|home| !is_test_file(home) && home.ends_with(".py"))
            .map(|home| home.trim_end_matches(".py").replace('/', "."))
            .collect();
        modules.sort();
        modules.dedup();
        modules
    }

    /// The import for `name`, undefined in the file `rel` holding `text`.
    fn import_for(&self, rel: &str, text: &str, name: &str) -> Option<String> {
        if let Some(import) = unaliased_import(text, name) {
            return Some(import);
        }
        let own = rel.trim_end_matches(".py").replace('/', ".");
        match self.python_modules_defining(name).as_slice() {
            [module] if *module != own => Some(format!("from {module} import {name}")),
            _ => None,
        }
    }

    /// Verifies the attempt's change; where the checkers report names it
    /// uses and never imports, and an import can be given, verifies it
    /// again with the imports added.
    pub(super) async fn verified_with_imports(&mut self) -> Result<Verification, StopCause> {
        let v = self.verify().await?;
        if v.passed || !self.import_undefined_names(Scope::Code).await? {
            return Ok(v);
        }
        self.verify().await
    }

    /// Adds the imports the changed files in `scope` lack, by the checkers'
    /// last report; whether a file changed (then verify again).
    pub(super) async fn import_undefined_names(&mut self, scope: Scope) -> Result<bool, StopCause> {
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut added: Vec<String> = Vec::new();
        for path in self.files.changed_files() {
            let rel = self.files.paths.relative(&path);
            if is_test_file(&rel) != (scope == Scope::Tests) || !rel.ends_with(".py") {
                continue;
            }
            let mut names: Vec<String> = self
                .last_checks
                .iter()
                .flat_map(|c| c.diagnostics())
                .filter(|d| d.severity == Severity::Error && d.path.ends_with(rel.as_str()))
                .filter_map(|d| undefined_name(&d.message))
                .collect();
            names.sort();
            names.dedup();
            let Some(text) = self.files.text(&path).filter(|_| !names.is_empty()) else {
                continue;
            };
            let imports: Vec<String> = names
                .iter()
                .filter_map(|name| self.import_for(&rel, &text, name))
                .collect();
            if imports.is_empty() {
                continue;
            }
            added.extend(imports.iter().map(|i| format!("`{i}` in {rel}")));
            calls.push(ToolCall {
                id: format!("import-undefined-{}", calls.len() + 1),
                name: "write_file".to_owned(),
                arguments: json!({ "path": rel, "content": with_imports(&imports, &text) }),
            });
        }
        if calls.is_empty() {
            return Ok(false);
        }
        let what = match scope {
            Scope::Tests => "The tests call what they never import",
            Scope::Code => "The change uses what it never imports",
        };
        self.status(&format!("{what}: added {}", added.join(", ")));
        self.run_tools(&calls).await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_checkers_report_undefined() {
        assert_eq!(
            undefined_name("Undefined name `get_factors`").as_deref(),
            Some("get_factors")
        );
        assert_eq!(
            undefined_name("undefined name 'gcd'").as_deref(),
            Some("gcd")
        );
        assert_eq!(undefined_name("`os` imported but unused"), None);
    }

    #[test]
    fn imports_go_beside_the_files_own_after_future_and_after_the_docstring() {
        let add = |text: &str| with_imports(&["from collections import deque"], text);
        // The QuixBugs file starts with a blank line.
        assert_eq!(
            add("\nfrom collections import deque as Queue\n\ndef f():\n    return deque()\n"),
            "\nfrom collections import deque as Queue\nfrom collections import deque\n\ndef f():\n    return deque()\n"
        );
        // `from __future__` must stay first; a parenthesized import whole.
        assert_eq!(
            add("\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\nfrom x import (\n    a,\n)\nX = 1\n"),
            "\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\nfrom x import (\n    a,\n)\nfrom collections import deque\nX = 1\n"
        );
        // No import: after the comments and the module docstring.
        assert_eq!(
            add("#!/usr/bin/env python3\n\"\"\"The module.\n\nMore.\n\"\"\"\n\ndef f():\n    pass\n"),
            "#!/usr/bin/env python3\n\"\"\"The module.\n\nMore.\n\"\"\"\n\nfrom collections import deque\n\n\ndef f():\n    pass\n"
        );
        assert_eq!(
            add("def f():\n    pass\n"),
            "from collections import deque\n\n\ndef f():\n    pass\n"
        );
        // A docstring's line that reads like an import is not one.
        assert_eq!(
            add("\"\"\"Counts words\nfrom the start.\"\"\"\n\ndef f():\n    pass\n"),
            "\"\"\"Counts words\nfrom the start.\"\"\"\n\nfrom collections import deque\n\n\ndef f():\n    pass\n"
        );
        // Nor an import a docstring quotes as usage.
        assert_eq!(
            add("\"\"\"Usage:\n\nfrom words import title_case\n\"\"\"\n\ndef f():\n    pass\n"),
            "\"\"\"Usage:\n\nfrom words import title_case\n\"\"\"\n\nfrom collections import deque\n\n\ndef f():\n    pass\n"
        );
        assert_eq!(add("x = 1"), "from collections import deque\n\n\nx = 1");
    }

    #[test]
    fn the_original_of_an_alias_gets_its_own_import() {
        let text = "\nfrom collections import deque as Queue\nimport numpy.linalg as la\nfrom x import (\n    a,\n    b as c,  # why\n)\n\ndef f():\n    return deque()\n";
        assert_eq!(
            unaliased_import(text, "deque").as_deref(),
            Some("from collections import deque")
        );
        assert_eq!(
            unaliased_import(text, "numpy").as_deref(),
            Some("import numpy")
        );
        assert_eq!(
            unaliased_import(text, "b").as_deref(),
            Some("from x import b")
        );
        // Not aliased, or not imported at all: nothing to give.
        assert_eq!(unaliased_import(text, "a"), None);
        assert_eq!(unaliased_import(text, "Queue"), None);
        assert_eq!(unaliased_import(text, "linalg"), None);
        assert_eq!(unaliased_import("import os\n", "os"), None);
        // A continued line is one statement; a docstring's is none.
        assert_eq!(
            unaliased_import("from y import \\\n    d as e\n", "d").as_deref(),
            Some("from y import d")
        );
        let quoted = "\"\"\"Use:\nfrom collections import deque as Queue\n\"\"\"\n";
        assert_eq!(unaliased_import(quoted, "deque"), None);
    }
}
