#!/usr/bin/env python3
"""`fettle fix --goal … --tests-first` on QuixBugs programs written from
their specification: are the model's own tests right, and does the code
it then writes pass tests it never saw?

What it measures
----------------
For each QuixBugs program NAME (github.com/jkoppel/QuixBugs, pinned as in
benches/quixbugs.py, whose workspace code this script reuses) a fresh
workspace holds

  NAME.py         the program's specification (the docstring QuixBugs
                  ships with it) over a stub with the reference
                  signature: `def NAME(…): raise NotImplementedError`
  test_smoke.py   one passing test (the module imports), so the project
                  has a test suite to name the new tests after
  node.py         for the graph programs

and the real binary runs

  fettle fix --yes --json --test "python3 -m pytest -q" \\
      --goal "Implement NAME in NAME.py as its docstring specifies." \\
      [--tests-first] WS

Recorded per program, and judged by this script, not by Fettle:

  tests written   the test files the task wrote first (`testsWritten`)
  tests right     those files pass against QuixBugs' reference program
                  (a test that fails on the correct code pins a wrong
                  behaviour); with `node.py` and nothing else beside it
  implemented     QuixBugs' own tests (held out: never in the workspace,
                  built as benches/quixbugs.py builds them, each case
                  with its 3 s alarm) pass against the final NAME.py
  fettle          its status, seconds, iterations, tokens

`--mode plain` runs the same goal without `--tests-first` (the smoke test
is then the only verification): the comparison says what writing the
tests first buys.

Reproduce
---------
  python3 benches/tests_first.py --quixbugs /tmp/QuixBugs --fettle BIN \\
      --model-path ~/.cache/fettle/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
      --context-tokens 8192 --timeout-s 300 [--mode plain] \\
      [--only gcd,bitcount] --out F --markdown

  # the plumbing, with a scripted mock model (seconds)
  python3 benches/tests_first.py --quixbugs /tmp/QuixBugs --fettle BIN --mock-script S.json --only gcd
"""
import argparse
import ast
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quixbugs as qb  # noqa: E402  (the workspace code is shared)

HELD_OUT_TIMEOUT_S = 120


def spec_of(buggy):
    """The longest module-level string of the program: QuixBugs' spec."""
    try:
        tree = ast.parse(buggy)
    except SyntaxError:
        return None
    texts = [n.value.value for n in tree.body
             if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
             and isinstance(n.value.value, str)]
    return max(texts, key=len).strip() if texts else None


def signature_of(correct, name):
    """`def name(args):` of the reference program, or None."""
    try:
        tree = ast.parse(correct)
    except SyntaxError:
        return None
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == name:
            return f"def {name}({ast.unparse(n.args)}):"
    return None


def stub(task):
    """NAME.py as the user would start it: the spec over a stub."""
    spec = spec_of(task.buggy)
    sig = signature_of(task.correct or "", task.name)
    if not spec or not sig:
        return None
    body = "\n".join(("    " + line).rstrip() for line in spec.splitlines())
    return f'{sig}\n    """\n{body}\n    """\n    raise NotImplementedError\n'


def smoke_test(name):
    return (f"import {name}\n\n\n"
            f"def test_{name}_is_defined():\n"
            f"    assert callable({name}.{name})\n")


def pytest_in(ws, env, files=None):
    """(rc or None on timeout, output tail) of pytest in ws (on files, or all)."""
    cmd = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", *(files or [])]
    p = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, preexec_fn=qb.limit_memory)
    try:
        out, _ = p.communicate(timeout=HELD_OUT_TIMEOUT_S)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        qb.kill_group(p)
        out, _ = p.communicate()
        rc = None
    return rc, qb._clip(out.decode(errors="replace"), 1500, tail=True)


def judge_dir(root, program, node, tests):
    """A fresh folder with `program` as NAME.py, node.py and `tests` ({rel: text})."""
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for rel, text in {**program, **tests}.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    if node is not None:
        with open(os.path.join(root, "node.py"), "w", encoding="utf-8") as f:
            f.write(node)
    return root


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def run_task(t, args, env, workdir, mock_script):
    tdir = os.path.join(workdir, "run", t.name)
    shutil.rmtree(tdir, ignore_errors=True)
    ws = os.path.join(tdir, "ws")
    program_rel = f"{t.name}.py"
    judge_dir(ws, {program_rel: stub(t), "test_smoke.py": smoke_test(t.name)}, t.node, {})
    mock = mock_url = None
    if mock_script:
        mock, mock_url = qb.start_mock(args.fettle, mock_script, os.path.join(tdir, "mock-requests.jsonl"))
    config_home = os.path.join(tdir, "config")
    os.makedirs(os.path.join(config_home, "fettle"))
    with open(os.path.join(config_home, "fettle", "config.toml"), "w") as f:
        f.write(qb.config_text(args, mock_url))
    fenv = dict(env, FETTLE_CACHE_DIR=os.path.join(tdir, "cache"), XDG_CONFIG_HOME=config_home)
    fenv.pop("FETTLE_LOG", None)
    if args.fettle_log:
        fenv["FETTLE_LOG"] = args.fettle_log
    goal = f"Implement {t.name} in {program_rel} as its docstring specifies."
    cmd = [args.fettle, "fix", "--yes", "--json", "--test", "python3 -m pytest -q", "--goal", goal]
    if args.mode == "tests-first":
        cmd.append("--tests-first")
    cmd.append(ws)
    rc, killed, seconds = qb.run_fettle(cmd, ws, fenv, os.path.join(tdir, "stdout.json"),
                                        os.path.join(tdir, "stderr.log"), args.timeout_s + qb.KILL_GRACE_S)
    if mock:
        qb.kill_group(mock)
    result = qb.parse_result(read(os.path.join(tdir, "stdout.json")) or "")
    r = result or {}
    final = read(os.path.join(ws, program_rel)) or ""

    # The tests the task wrote, judged against the reference program.
    written = [rel for rel in (r.get("testsWritten") or []) if rel != "test_smoke.py"]
    own_tests = {rel: read(os.path.join(ws, rel)) for rel in written}
    own_tests = {rel: text for rel, text in own_tests.items() if text is not None}
    tests_right = tests_right_out = None
    if own_tests:
        root = judge_dir(os.path.join(tdir, "judge-own"), {program_rel: t.correct}, t.node, own_tests)
        rc_own, tests_right_out = pytest_in(root, env, sorted(own_tests))
        tests_right = rc_own == 0
    # The final program, judged by QuixBugs' own tests.
    root = judge_dir(os.path.join(tdir, "judge-held-out"), {program_rel: final}, t.node,
                     {t.test_file: t.test})
    rc_held, held_out = pytest_in(root, env, [t.test_file])
    implemented = rc_held == 0

    tokens = r.get("tokens") or {}
    record = {
        "program": t.name,
        "mode": args.mode,
        "implemented": implemented,
        "tests_written": written,
        "tests_right": tests_right,
        "seconds": round(seconds, 1),
        "fettle_exit": rc,
        "killed_at_timeout": killed,
        "status": r.get("status") if result else ("killed" if killed else "no-json"),
        "iterations": r.get("iterations"),
        "tokens_in": tokens.get("input"),
        "tokens_out": tokens.get("output"),
        "summary": qb._clip(r.get("summary") or "", 3000) if result else None,
        "final_program": qb._clip(final, 6000),
        "own_tests": {rel: qb._clip(text, 4000) for rel, text in own_tests.items()},
        "own_tests_on_reference": tests_right_out if tests_right is False else None,
        "held_out_output": held_out if not implemented else None,
        "stderr_tail": qb._clip(read(os.path.join(tdir, "stderr.log")) or "", 3000, tail=True),
    }
    qb.keep_task(tdir, args.keep, t.name)
    return record


def summarize(records):
    n = len(records)
    implemented = sum(1 for r in records if r["implemented"])
    wrote = [r for r in records if r["tests_written"]]
    right = sum(1 for r in wrote if r["tests_right"])
    success = sum(1 for r in records if r["status"] == "success")
    false_success = sum(1 for r in records if r["status"] == "success" and not r["implemented"])
    med = statistics.median([r["seconds"] for r in records]) if records else 0.0
    return {"ran": n, "implemented": implemented, "tests_written": len(wrote), "tests_right": right,
            "fettle_success": success, "success_but_held_out_fails": false_success,
            "median_seconds": round(med, 1),
            "line": f"implemented {implemented}/{n} (held-out tests); tests written {len(wrote)}/{n}, "
                    f"right {right}/{len(wrote)}; fettle said success {success} "
                    f"({false_success} of them failing the held-out tests); median {med:.1f} s"}


def markdown(records):
    rows = ["| program | implemented | tests written | tests right | status | seconds | tokens in/out |",
            "|---|---|---|---|---|---:|---:|"]
    for r in records:
        def v(x):
            return "–" if x is None else ("yes" if x is True else "no" if x is False else str(x))
        rows.append(f"| {r['program']} | {v(r['implemented'])} | {', '.join(r['tests_written']) or '–'} | "
                    f"{v(r['tests_right'])} | {r['status']} | {r['seconds']:.1f} | "
                    f"{v(r['tokens_in'])}/{v(r['tokens_out'])} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quixbugs", required=True, metavar="DIR")
    ap.add_argument("--fettle", default=qb.DEFAULT_FETTLE, metavar="PATH")
    model = ap.add_mutually_exclusive_group(required=True)
    model.add_argument("--model-path", metavar="GGUF")
    model.add_argument("--model-config", metavar="FILE")
    model.add_argument("--mock-script", metavar="FILE")
    ap.add_argument("--context-tokens", type=int)
    ap.add_argument("--timeout-s", type=float, default=300)
    ap.add_argument("--mode", choices=["tests-first", "plain"], default="tests-first")
    ap.add_argument("--only", metavar="a,b,c")
    ap.add_argument("--out", metavar="FILE")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--python", metavar="PY")
    ap.add_argument("--keep", metavar="DIR")
    ap.add_argument("--fettle-log", metavar="DIRECTIVE")
    args = ap.parse_args()

    repo = qb.QuixBugs(args.quixbugs)
    if repo.commit != qb.PINNED_COMMIT:
        qb.log(f"warning: pinned to QuixBugs {qb.PINNED_COMMIT}; this is {repo.commit}")
    names = repo.programs()
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise SystemExit(f"--only: no such program(s): {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    qb.check_fettle_and_model(args)
    python3, bindir, pytest_version = qb.find_python(args.python)
    env = qb.test_env(bindir)
    mock_script = os.path.abspath(os.path.expanduser(args.mock_script)) if args.mock_script else None

    tasks = []
    for n in names:
        t = qb.Task(repo, n)
        if t.error or t.correct is None or stub(t) is None:
            qb.log(f"skipped {n}: {t.error or 'no specification or reference signature'}")
            continue
        tasks.append(t)
    version = subprocess.run([args.fettle, "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT).stdout.decode().strip()
    report = {"benchmark": "quixbugs-tests-first", "mode": args.mode, "quixbugs_commit": repo.commit,
              "fettle": args.fettle, "fettle_version": version, "timeout_s": args.timeout_s,
              "python": f"{python3} ({pytest_version})", "cpus": os.cpu_count(),
              "config": qb.config_text(args, "http://127.0.0.1:PORT" if mock_script else None),
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "tasks": []}
    workdir = tempfile.mkdtemp(prefix="fettle-tests-first-")
    try:
        for i, t in enumerate(tasks, 1):
            qb.wait_while_paused(args.out)
            qb.log(f"[{i}/{len(tasks)}] {t.name} …")
            rec = run_task(t, args, env, workdir, mock_script)
            if rec["fettle_exit"] == 2 and rec["status"] == "no-json":
                raise SystemExit("fettle fix exited 2 (usage or configuration error):\n" + rec["stderr_tail"])
            report["tasks"].append(rec)
            report["summary"] = summarize(report["tasks"])
            if args.out:
                qb.write_json(args.out, report)
            qb.log(f"[{i}/{len(tasks)}] {t.name}: {'IMPLEMENTED' if rec['implemented'] else 'not implemented'}"
                   f" (tests written: {', '.join(rec['tests_written']) or 'none'}"
                   f"{'' if rec['tests_right'] is None else ', right' if rec['tests_right'] else ', WRONG'};"
                   f" fettle: {rec['status']}, {rec['seconds']:.1f} s)")
        report["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if args.out:
            qb.write_json(args.out, report)
        if args.markdown:
            print(markdown(report["tasks"]))
        print(summarize(report["tasks"])["line"] if report["tasks"] else "nothing run")
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
