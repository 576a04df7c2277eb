#!/usr/bin/env python3
"""The debugging agent on the regression corpus, with a real model: does
the bisection's context (the commit that broke the tests, and its diff)
help the model fix the bug?

Each case of tests/fixtures/regressions/cases (a small repository whose
history has one commit that breaks a test) is built fresh with build.py
and repaired twice with `fettle fix --json`: with `--since <first commit>`
and without. Prints, per case, whether the bisection named the right
commit and whether each run fixed the bug (Fettle's verdict, checked by
running the tests again).

    python3 benches/regressions.py --fettle target/release/fettle \\
        --model-path ~/.cache/fettle/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --out /tmp/regressions.json

Needs git, python3 with pytest, node and cargo (as the corpus's tests do).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "fixtures", "regressions")


def build(case_path, dest):
    out = subprocess.run([sys.executable, os.path.join(CORPUS, "build.py"), case_path, dest],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def run(args, case, case_path, since):
    with tempfile.TemporaryDirectory(prefix="fettle-regression-") as tmp:
        ws = os.path.join(tmp, "ws")
        shas = build(case_path, ws)
        cfg = os.path.join(tmp, "config")
        os.makedirs(os.path.join(cfg, "fettle"))
        path = os.path.abspath(os.path.expanduser(args.model_path))
        with open(os.path.join(cfg, "fettle", "config.toml"), "w") as f:
            # The model's own time limit is the task's (the default, 120 s
            # a request, is for completions; a first prompt with a
            # bisection's diff takes longer to read on a small CPU).
            f.write(f'[models.bench]\nprovider = "local"\npath = {json.dumps(path)}\n'
                    f"context_tokens = {args.context_tokens}\n"
                    f"total_timeout_ms = {args.timeout_s * 1000}\n\n"
                    f'[agent]\nmodel = "bench"\ntimeout_s = {args.timeout_s}\n')
        env = dict(os.environ, XDG_CONFIG_HOME=cfg, FETTLE_CACHE_DIR=os.path.join(tmp, "cache"),
                   CARGO_TARGET_DIR=os.path.join(tmp, "target"))
        cmd = [args.fettle, "fix", "--json", "--yes", "--test", case["test"]]
        if since:
            cmd += ["--since", shas[0]]
        cmd.append(ws)
        started = time.monotonic()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout_s + 120)
        seconds = time.monotonic() - started
        try:
            result = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            result = {}
        retest = subprocess.run(case["test"], shell=True, cwd=ws, env=env, capture_output=True)
        bisect = result.get("bisect") or {}
        return {
            "status": result.get("status"),
            "fixed": retest.returncode == 0,
            "seconds": round(seconds, 1),
            "iterations": result.get("iterations"),
            "bisect_right": bisect.get("firstBad") == shas[case["first_bad"]] if since else None,
            "summary": (result.get("summary") or p.stderr[-2000:])[:2000],
            "diff": (result.get("diff") or "")[:4000],
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fettle", default="~/.cache/fettle-ci/target-release/release/fettle")
    ap.add_argument("--model-path", required=True, metavar="GGUF")
    ap.add_argument("--context-tokens", type=int, default=8192)
    ap.add_argument("--timeout-s", type=int, default=600)
    ap.add_argument("--only", metavar="a,b")
    ap.add_argument("--out", metavar="FILE")
    args = ap.parse_args()
    args.fettle = os.path.expanduser(args.fettle)
    cases_dir = os.path.join(CORPUS, "cases")
    names = sorted(n[:-5] for n in os.listdir(cases_dir) if n.endswith(".json"))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    records = []
    for name in names:
        case_path = os.path.join(cases_dir, name + ".json")
        with open(case_path) as f:
            case = json.load(f)
        record = {"case": name}
        for label, since in (("with_bisect", True), ("without", False)):
            record[label] = run(args, case, case_path, since)
            r = record[label]
            print(f"{name} {label}: {'FIXED' if r['fixed'] else 'not fixed'} ({r['status']}, "
                  f"{r['iterations']} iteration(s), {r['seconds']} s"
                  + (f", bisect {'right' if r['bisect_right'] else 'WRONG'}" if since else "") + ")",
                  flush=True)
        records.append(record)
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"fettle": args.fettle, "model": args.model_path, "records": records}, f, indent=1)
    with_n = sum(r["with_bisect"]["fixed"] for r in records)
    without_n = sum(r["without"]["fixed"] for r in records)
    right = sum(bool(r["with_bisect"]["bisect_right"]) for r in records)
    print(f"bisect right {right}/{len(records)}; fixed with the bisection {with_n}/{len(records)}, "
          f"without {without_n}/{len(records)}")


if __name__ == "__main__":
    main()
