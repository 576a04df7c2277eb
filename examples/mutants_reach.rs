//! How far the mechanical changes reach on a corpus of buggy programs with
//! their reference fixes (QuixBugs's `python_programs/` and
//! `correct_python_programs/`): per program, the changes made of the whole
//! buggy file by kind, and whether the reference fix is one of them
//! (compared as code before the docstring, without spaces or comments).
//!
//! `cargo run --release --example mutants_reach -- BUGGY_DIR CORRECT_DIR`

use std::collections::BTreeMap;
use std::path::Path;

use fettle::agent::mutate::mutants;
use fettle::syntax::Language;

/// The code before the docstring, without spaces or comments.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("\"\"\"") {
            break;
        }
        let code = line.split('#').next().unwrap_or_default();
        out.extend(code.chars().filter(|c| !c.is_whitespace()));
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [buggy, correct] = args.as_slice() else {
        return Err("usage: mutants_reach BUGGY_DIR CORRECT_DIR".into());
    };
    let mut names: Vec<String> = std::fs::read_dir(buggy)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".py") && !n.ends_with("_test.py") && n != "node.py")
        .collect();
    names.sort();
    let (mut programs, mut changes, mut reached) = (0, 0, 0);
    for name in names {
        let Ok(reference) = std::fs::read_to_string(Path::new(correct).join(&name)) else {
            continue;
        };
        let text = std::fs::read_to_string(Path::new(buggy).join(&name))?;
        let lines = u32::try_from(text.lines().count()).unwrap_or(u32::MAX);
        let found = mutants(Language::Python, &text, (1, lines), 600);
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for m in &found {
            *kinds.entry(format!("{:?}", m.kind)).or_default() += 1;
        }
        let target = code_of(&reference);
        let fix = found
            .iter()
            .enumerate()
            .find(|(_, m)| m.apply(&text).is_some_and(|t| code_of(&t) == target));
        let verdict = match fix {
            Some((i, m)) => format!("reference fix #{} ({:?}: {})", i + 1, m.kind, m.what),
            None => "reference fix not among them".to_owned(),
        };
        println!("{name:32} {:4} changes  {verdict}  {kinds:?}", found.len());
        programs += 1;
        changes += found.len();
        reached += usize::from(fix.is_some());
    }
    println!("{programs} programs, {changes} changes, the reference fix among them for {reached}");
    Ok(())
}
