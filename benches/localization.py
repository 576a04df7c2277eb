#!/usr/bin/env python3
"""Fault localization on real code nobody here wrote: single-point bugs
injected into functions of real pure-Python projects, and where Fettle puts
the buggy file and function.

For each project (a PyPI sdist at a pinned version, checked by SHA-256,
downloaded with pip, never committed) the script runs the project's own
tests, then mutates one token in one function at a time — `+`/`-`,
`<`/`<=`, `==`/`!=`, `and`/`or`, an integer n → n+1, `True`/`False` —
choosing functions whose names no test file mentions (reached indirectly,
as bugs in helpers are), in a seeded order, and keeps a mutant when 1–20
tests fail. For each kept bug it runs `fettle fix --json` against a mock
model that gives up at once (no model time: only what Fettle computes
before the first turn) and reads

- `suspects` from the result: the ranked functions, each with why — the
  buggy function's rank (top-1, top-5) and its file's rank among the
  suspects' files (top-1, top-3);
- the first prompt's repository map (from the mock's record of requests):
  the buggy file's rank among the map's files (top-3) and the buggy
  function's among the map's functions, in the map's order (top-5) — and,
  with `--before-fettle OLD`, the same for an earlier build's map.

Results are split by whether the failing output names the buggy function.

  python3 benches/localization.py --fettle target/release/fettle \\
      [--bugs-per-project 25] [--seed 1] [--only tabulate] --out F --markdown

Needs pip (to download the sdists), pytest, and a network path to PyPI the
first time (the sdists are cached in ~/.cache/fettle-bench/sdists).
"""
import argparse
import ast
import glob
import hashlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tokenize
import urllib.request

PROJECTS = [
    {
        "name": "tabulate",
        "version": "0.9.0",
        "sha256": "0095b12bf5966de529c0feb1fa08671671b3368eec77d7ef7ab114be2c068b3c",
        "package": "tabulate",
        "tests": "test",
        # test_cli runs the installed `tabulate` script; the others import
        # the package from the workspace.
        "test_command": "python3 -m pytest -q -p no:cacheprovider -k 'not test_cli' test",
    },
    {
        "name": "boltons",
        "version": "24.0.0",
        "sha256": "7153feccaea1ff2e1472f68d4b57fadb796a2ee49d29f638f1c9cd8fb5ebd916",
        "package": "boltons",
        "tests": "tests",
        # The socket tests need the network, which Fettle's sandbox has not.
        "test_command": "python3 -m pytest -q -p no:cacheprovider -k 'not socketutils' tests",
    },
    {
        # A Rust crate (from crates.io, pinned by the .crate's SHA-256):
        # string similarity, its helpers (the DP index, the hash map of the
        # Damerau–Levenshtein implementation, bigrams) reached only through
        # the public functions.
        "name": "strsim",
        "version": "0.11.1",
        "kind": "rust",
        "sha256": "7da8b5736845d9f2fcb837ea5d9e2628564b3b043a70948a3f0b778838c5fb4f",
        "package": "src",
        "tests": "tests",
        "test_command": "cargo test --offline",
    },
    {
        # Float parsing: many small helpers below `parse_float`.
        "name": "minimal-lexical",
        "version": "0.2.1",
        "kind": "rust",
        "sha256": "68354c5c6bd36d73ff3feceb05efa59b6acb7626617f4962be322a825e61f79a",
        "package": "src",
        "tests": "tests",
        "test_command": "cargo test --offline",
    },
]

SWAPS = {
    "+": "-", "-": "+", "<": "<=", "<=": "<", ">": ">=", ">=": ">",
    "==": "!=", "!=": "==", "and": "or", "or": "and", "True": "False", "False": "True",
}
MIN_FAILED, MAX_FAILED = 1, 20
SDIST_CACHE = os.path.expanduser("~/.cache/fettle-bench/sdists")
MOCK_GIVE_UP = {"responses": [{"text": "I could not find the defect; I give up.", "repeat": True}]}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def crate(project):
    """The .crate from cargo's cache, else from crates.io."""
    name = f"{project['name']}-{project['version']}.crate"
    path = os.path.join(SDIST_CACHE, name)
    cached = [os.path.join(d, name) for d in
              glob.glob(os.path.expanduser("~/.cargo/registry/cache/*"))]
    cached = [c for c in cached if os.path.exists(c)]
    if not os.path.exists(path):
        os.makedirs(SDIST_CACHE, exist_ok=True)
        if cached:
            shutil.copy(cached[0], path)
        else:
            url = f"https://static.crates.io/crates/{project['name']}/{name}"
            with urllib.request.urlopen(url, timeout=60) as r, open(path, "wb") as f:
                f.write(r.read())
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if digest != project["sha256"]:
        raise SystemExit(f"{name}: sha256 {digest}, expected {project['sha256']}")
    return path


def sdist(project):
    if project.get("kind") == "rust":
        return crate(project)
    os.makedirs(SDIST_CACHE, exist_ok=True)
    name = f"{project['name']}-{project['version']}.tar.gz"
    path = os.path.join(SDIST_CACHE, name)
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "-d", SDIST_CACHE, f"{project['name']}=={project['version']}"],
                       check=True, stdout=subprocess.DEVNULL)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    if digest != project["sha256"]:
        raise SystemExit(f"{name}: sha256 {digest}, expected {project['sha256']}")
    return path


def extract(archive, into):
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/")[0]
        tar.extractall(into, filter="data")
    return os.path.join(into, top)


def run_tests(ws, command, timeout=300):
    p = subprocess.run(command, shell=True, cwd=ws, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    if command.startswith("cargo "):
        results = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed", out)
        failed = sum(int(f) for _, f in results)
        broken = "could not compile" in out or not results
        return p.returncode, failed, broken, out
    m = re.search(r"(\d+) failed", out)
    failed = int(m.group(1)) if m else 0
    errors = re.search(r"(\d+) errors?\b", out)
    return p.returncode, failed, bool(errors), out


def test_text(ws, tests_dir, package=None):
    chunks = []
    for dirpath, _, files in os.walk(os.path.join(ws, tests_dir)):
        for f in files:
            if f.endswith((".py", ".rs")):
                chunks.append(open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read())
    # Rust's unit tests live in the code's files, below `#[cfg(test)]`.
    for dirpath, _, files in os.walk(os.path.join(ws, package or tests_dir)):
        for f in files:
            if f.endswith(".rs"):
                text = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
                at = text.find("#[cfg(test)]")
                if at >= 0:
                    chunks.append(text[at:])
    return "\n".join(chunks)


RUST_SWAPS = {" + ": " - ", " - ": " + ", " < ": " <= ", " <= ": " < ", " > ": " >= ", " >= ": " > ",
              " == ": " != ", " != ": " == ", " && ": " || ", " || ": " && ", "true": "false", "false": "true"}
RUST_TOKEN = re.compile(r" (?:\+|-|<=|<|>=|>|==|!=|&&|\|\|) |\btrue\b|\bfalse\b|(?<![\w.])\d+(?![\w.])")


def blank_rust(text):
    """The text with comments, strings and char literals blanked (same
    length), so that braces and tokens are read from code only."""
    out, i, n = list(text), 0, len(text)
    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j); i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1); i = j + 1
        elif text[i] == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4] + "    "):
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            j = i + (len(m.group(0)) if m else 1)
            blank(i, j); i = j
        else:
            i += 1
    return "".join(out)


def rust_mutation_sites(ws, package, tests_text):
    """Like mutation_sites, for Rust: tokens inside the bodies of `fn`s no
    test names, outside `#[cfg(test)]` code."""
    sites = []
    for dirpath, _, files in os.walk(os.path.join(ws, package)):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ws)
            source = open(path, encoding="utf-8").read()
            code = blank_rust(source)
            cut = code.find("#[cfg(test)]")
            if cut >= 0:
                code = code[:cut]
            for m in re.finditer(r"\bfn\s+(\w+)", code):
                name = m.group(1)
                if re.search(r"\b%s\b" % re.escape(name), tests_text):
                    continue
                open_at = code.find("{", m.end())
                semi = code.find(";", m.end())
                if open_at < 0 or (0 <= semi < open_at):
                    continue  # a declaration without a body
                depth, j = 0, open_at
                while j < len(code):
                    depth += {"{": 1, "}": -1}.get(code[j], 0)
                    if depth == 0:
                        break
                    j += 1
                body = code[open_at + 1:j]
                if re.search(r"\bfn\s+\w+", body):
                    continue  # nested functions: the outer one is not the site
                def_line = code.count("\n", 0, m.start()) + 1
                for t in RUST_TOKEN.finditer(body):
                    at = open_at + 1 + t.start()
                    row = code.count("\n", 0, at) + 1
                    col = at - (code.rfind("\n", 0, at) + 1)
                    sites.append((rel, name, def_line, (row, col), (row, col + len(t.group(0))), t.group(0)))
    return sites


def mutation_sites(ws, package, tests_text):
    """(rel path, function name, def line, token) for every mutable token
    inside a function no test file names."""
    sites = []
    root = os.path.join(ws, package)
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ws)
            source = open(path, encoding="utf-8").read()
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
            for fn in functions:
                if re.search(r"\b%s\b" % re.escape(fn.name), tests_text):
                    continue
                body_start = fn.body[0].lineno
                # Skip a docstring.
                if isinstance(fn.body[0], ast.Expr) and isinstance(getattr(fn.body[0], "value", None), ast.Constant):
                    if len(fn.body) == 1:
                        continue
                    body_start = fn.body[1].lineno
                nested = [n for n in ast.walk(fn) if n is not fn and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
                for tok in tokens:
                    line = tok.start[0]
                    if not (body_start <= line <= fn.end_lineno):
                        continue
                    if any(n.lineno <= line <= n.end_lineno for n in nested):
                        continue
                    if (tok.type == tokenize.OP and tok.string in SWAPS) or \
                       (tok.type == tokenize.NAME and tok.string in SWAPS) or \
                       (tok.type == tokenize.NUMBER and re.fullmatch(r"\d+", tok.string)):
                        sites.append((rel, fn.name, fn.lineno, tok.start, tok.end, tok.string))
    return sites


def mutate(ws, site):
    rel, _, _, start, end, text = site
    path = os.path.join(ws, rel)
    lines = open(path, encoding="utf-8").read().split("\n")
    (row, col), (_, end_col) = start, end
    line = lines[row - 1]
    new = RUST_SWAPS.get(text) if rel.endswith(".rs") else SWAPS.get(text)
    new = new or str(int(text) + 1)
    lines[row - 1] = line[:col] + new + line[end_col:]
    open(path, "w", encoding="utf-8").write("\n".join(lines))
    return f"{rel}:{row}: `{text}` → `{new}`"


def start_mock(fettle, script, record):
    p = subprocess.Popen([fettle, "mock-model", "--script", script, "--port", "0", "--record", record],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    line = p.stdout.readline().decode().strip()
    m = re.match(r"listening on (http://\S+)", line)
    if not m:
        p.kill()
        raise SystemExit(f"fettle mock-model did not start: {line!r}")
    return p, m.group(1)


def map_entries(request_body):
    """The first prompt's repository map: its files in order, and its
    (file, function) lines in order."""
    for message in request_body.get("messages", []):
        text = message.get("content") or ""
        at = text.find("Repository map")
        if at < 0:
            continue
        block = text[at:].split("</data", 1)[0]
        files, functions, current = [], [], None
        for line in block.splitlines():
            if line.endswith(":") and not line.startswith(" "):
                current = line[:-1]
                files.append(current)
                continue
            m = re.search(r"│\s*(?:async\s+)?(?:def|fn|function)\s+(\w+)", line)
            if m and current:
                functions.append((current, m.group(1)))
        return files, functions
    return [], []


def localize(fettle, ws, test_command, tmp):
    script = os.path.join(tmp, "give-up.json")
    json.dump(MOCK_GIVE_UP, open(script, "w"))
    record = os.path.join(tmp, "requests.jsonl")
    if os.path.exists(record):
        os.remove(record)
    mock, url = start_mock(fettle, script, record)
    config_home = os.path.join(tmp, "config")
    os.makedirs(os.path.join(config_home, "fettle"), exist_ok=True)
    with open(os.path.join(config_home, "fettle", "config.toml"), "w") as f:
        f.write(f'[models.bench]\nprovider = "openai"\nbase_url = "{url}/v1"\nmodel = "mock-coder"\n'
                'max_retries = 0\n\n[agent]\nmodel = "bench"\nmax_iterations = 1\n')
    env = dict(os.environ, XDG_CONFIG_HOME=config_home, FETTLE_CACHE_DIR=os.path.join(tmp, "cache"))
    env.pop("FETTLE_LOG", None)
    started = time.monotonic()
    try:
        p = subprocess.run([fettle, "fix", "--yes", "--json", "--test", test_command, ws],
                           capture_output=True, text=True, env=env, timeout=900)
    finally:
        mock.kill()
        mock.wait()
    seconds = time.monotonic() - started
    try:
        result = json.loads(p.stdout)
    except json.JSONDecodeError:
        return None, ([], []), seconds, p.stderr[-2000:]
    entries = ([], [])
    try:
        with open(record) as f:
            first = json.loads(f.readline())
        body = first.get("body", first)
        if isinstance(body, str):
            body = json.loads(body)
        entries = map_entries(body)
    except (OSError, ValueError):
        pass
    # The give-up leaves the files as they were.
    return result, entries, seconds, None


def rank_of(items, pred):
    for i, item in enumerate(items):
        if pred(item):
            return i + 1
    return None


def suspect_ranks(bug, result):
    suspects = (result or {}).get("suspects", [])
    fn = rank_of(suspects, lambda s: s["name"] == bug["function"] and s["path"] == bug["path"])
    files = []
    for s in suspects:
        if s["path"] not in files:
            files.append(s["path"])
    return fn, rank_of(files, lambda p: p == bug["path"])


def evaluate(bug, result, entries, before_entries, before_result=None):
    suspects = (result or {}).get("suspects", [])
    fn = rank_of(suspects, lambda s: s["name"] == bug["function"] and s["path"] == bug["path"])
    files = []
    for s in suspects:
        if s["path"] not in files:
            files.append(s["path"])
    def map_ranks(entries):
        map_files, map_functions = entries
        return (rank_of(map_files, lambda p: p == bug["path"]),
                rank_of(map_functions, lambda e: e == (bug["path"], bug["function"])))
    map_file, map_fn = map_ranks(entries)
    out = {
        "function_rank": fn, "file_rank": rank_of(files, lambda p: p == bug["path"]),
        "map_file_rank": map_file, "map_function_rank": map_fn,
        "suspects": [f"{s['name']} ({s['path']}): {s['why']}" for s in suspects],
    }
    if before_entries is not None:
        out["before_map_file_rank"], out["before_map_function_rank"] = map_ranks(before_entries)
        out["before_function_rank"], out["before_file_rank"] = suspect_ranks(bug, before_result)
    coverage = (result or {}).get("coverage")
    if coverage:
        out["coverage"] = coverage
    return out


def summary(records):
    out = {}
    for label, subset in [("all", records),
                          ("named", [r for r in records if r["named"]]),
                          ("not named", [r for r in records if not r["named"]])]:
        if not subset:
            continue
        recs = subset
        def sh(key, k, recs=recs):
            hit = sum(1 for r in recs if r.get(key) is not None and r[key] <= k)
            return f"{hit}/{len(recs)}"
        out[label] = {
            "suspects: function top-1": sh("function_rank", 1),
            "suspects: function top-5": sh("function_rank", 5),
            "suspects: file top-1": sh("file_rank", 1), "suspects: file top-3": sh("file_rank", 3),
            "map: file top-3": sh("map_file_rank", 3), "map: function top-5": sh("map_function_rank", 5),
            "before, map: file top-3": sh("before_map_file_rank", 3),
            "before, map: function top-5": sh("before_map_function_rank", 5),
            "before: function top-1": sh("before_function_rank", 1),
            "before: function top-5": sh("before_function_rank", 5),
            "before: file top-3": sh("before_file_rank", 3),
        }
        # The traced run's time against the first test run's.
        ratios = sorted(r["coverage"]["seconds"] / r["coverage"]["testRunSeconds"]
                        for r in recs if r.get("coverage", {}).get("testRunSeconds"))
        if ratios:
            out[label]["coverage / test run (median, max)"] = (
                f"{ratios[len(ratios) // 2]:.2f}×, {ratios[-1]:.2f}×")
    return out


def markdown(summ):
    keys = list(next(iter(summ.values())).keys()) if summ else []
    lines = ["| bugs | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for label, row in summ.items():
        lines.append(f"| {label} | " + " | ".join(row.get(k, "–") for k in keys) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fettle", required=True)
    ap.add_argument("--before-fettle", help="an earlier build: its first prompt's map is ranked too")
    ap.add_argument("--bugs-per-project", type=int, default=25)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", help="these projects only (comma-separated)")
    ap.add_argument("--out")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    args.fettle = os.path.abspath(args.fettle)
    if args.before_fettle:
        args.before_fettle = os.path.abspath(args.before_fettle)
    only = set(args.only.split(",")) if args.only else None
    report = {"benchmark": "localization", "fettle": args.fettle, "seed": args.seed, "bugs": []}
    with tempfile.TemporaryDirectory(prefix="fettle-loc-") as tmp:
        for project in PROJECTS:
            if only and project["name"] not in only:
                continue
            archive = sdist(project)
            pristine = extract(archive, os.path.join(tmp, "src-" + project["name"]))
            code, failed, errors, out = run_tests(pristine, project["test_command"])
            if code != 0:
                raise SystemExit(f"{project['name']}: the tests fail before any bug:\n{out[-2000:]}")
            tests_text = test_text(pristine, project["tests"], project["package"])
            find_sites = rust_mutation_sites if project.get("kind") == "rust" else mutation_sites
            sites = find_sites(pristine, project["package"], tests_text)
            random.Random(args.seed).shuffle(sites)
            log(f"{project['name']} {project['version']}: {len(sites)} mutable tokens in untested-by-name functions")
            kept, tried, functions_used = 0, 0, set()
            # The mutants kept by an earlier run with the same seed: the
            # search (a test run per mutant tried) is most of the time.
            known_path = os.path.join(
                SDIST_CACHE, f"kept-{project['name']}-{project['version']}-seed{args.seed}.json")
            known = json.load(open(known_path)) if os.path.exists(known_path) else []
            if len(known) >= args.bugs_per_project:
                sites = [k["site"] for k in known[:args.bugs_per_project]]
            else:
                # The ones kept before first, then the search goes on.
                first = [k["site"] for k in known]
                sites = first + [s for s in sites if json.loads(json.dumps(s)) not in first]
            for site in sites:
                if kept >= args.bugs_per_project:
                    break
                rel, fn_name = site[0], site[1]
                # One bug per function: the benchmark is about many places.
                if (rel, fn_name) in functions_used:
                    continue
                tried += 1
                ws = os.path.join(tmp, "ws")
                shutil.rmtree(ws, ignore_errors=True)
                shutil.copytree(pristine, ws)
                what = mutate(ws, site)
                code, failed, errors, out = run_tests(ws, project["test_command"])
                if errors or not (MIN_FAILED <= failed <= MAX_FAILED):
                    continue
                functions_used.add((rel, fn_name))
                if not any(k["site"] == json.loads(json.dumps(site)) for k in known):
                    known.append({"site": json.loads(json.dumps(site))})
                    json.dump(known, open(known_path, "w"))
                bug = {"project": project["name"], "path": rel, "function": fn_name, "mutation": what,
                       "failed_tests": failed,
                       "named": bool(re.search(r"\b%s\b" % re.escape(fn_name), out))}
                if project.get("kind") == "rust":
                    # As after a user's edit: cargo rebuilds the changed
                    # crate in Fettle's first test run (the run above built
                    # it already), so the traced run is compared with a test
                    # run that includes its build.
                    os.utime(os.path.join(ws, rel))
                result, entries, seconds, error = localize(args.fettle, ws, project["test_command"], tmp)
                before, before_result = None, None
                if args.before_fettle:
                    before_result, before, _, _ = localize(args.before_fettle, ws, project["test_command"], tmp)
                bug.update(evaluate(bug, result, entries, before, before_result))
                if before_result and before_result.get("coverage"):
                    bug["before_coverage"] = before_result["coverage"]
                bug["seconds"] = round(seconds, 1)
                if error:
                    bug["error"] = error
                kept += 1
                report["bugs"].append(bug)
                log(f"  [{kept}] {what} in {fn_name} ({failed} failed{', named' if bug['named'] else ''}): "
                    f"suspects: function #{bug['function_rank']}, file #{bug['file_rank']}; "
                    f"map: file #{bug['map_file_rank']}, function #{bug['map_function_rank']}"
                    f"{'' if before is None else ', before: file #%s, function #%s' % (bug['before_map_file_rank'], bug['before_map_function_rank'])}"
                    f", {seconds:.1f} s")
                report["summary"] = summary(report["bugs"])
                if args.out:
                    json.dump(report, open(args.out, "w"), indent=2, ensure_ascii=False)
            log(f"{project['name']}: {kept} bugs kept of {tried} mutants tried")
    report["summary"] = summary(report["bugs"])
    if args.out:
        json.dump(report, open(args.out, "w"), indent=2, ensure_ascii=False)
    if args.markdown:
        print(markdown(report["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
