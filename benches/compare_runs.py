#!/usr/bin/env python3
"""Side by side: several `benches/quixbugs.py --out` results, one column
each (a strategy, a build), as the Markdown tables docs/agent.md keeps.

    python3 benches/compare_runs.py "single line=single.json" \\
        "--candidates 4=cand.json" "--plan=plan.json" "--review=review.json"

Each argument is LABEL=FILE. The first table has a row a program (fixed,
and the seconds it took), the second the totals: programs fixed, median
seconds over all tasks and over the fixed ones, tokens in/out summed, and
the programs each run fixed that the first one did not (and lost).
"""

import json
import statistics
import sys


def load(arg):
    label, sep, path = arg.rpartition("=")
    if not sep or not label:
        raise SystemExit(f"{arg}: expected LABEL=FILE")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    tasks = {t["program"]: t for t in data.get("tasks", [])}
    if not tasks:
        raise SystemExit(f"{path}: no tasks (not a benches/quixbugs.py result?)")
    return label, data, tasks


def cell(task):
    if task is None:
        return "—"
    mark = "**yes**" if task.get("fixed") else "no"
    seconds = task.get("seconds")
    return f"{mark}, {seconds:.1f} s" if seconds is not None else mark


def median(values):
    return f"{statistics.median(values):.1f}" if values else "—"


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    runs = [load(a) for a in argv[1:]]
    programs = sorted({p for _, _, tasks in runs for p in tasks})
    labels = [label for label, _, _ in runs]
    print("| program | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for program in programs:
        print(f"| {program} | " + " | ".join(cell(tasks.get(program)) for _, _, tasks in runs) + " |")
    print()
    first = {p for p, t in runs[0][2].items() if t.get("fixed")}
    print("| | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    rows = {"build": [], "fixed": [], "median s (all / fixed)": [],
            "tokens in / out": [], "gained / lost (against the first)": []}
    for _, data, tasks in runs:
        done = [t for t in tasks.values() if t.get("fixed")]
        fixed = {t["program"] for t in done}
        rows["build"].append(str(data.get("fettle", "?")).rsplit("/", 1)[-1])
        rows["fixed"].append(f"**{len(done)}/{len(tasks)}**")
        rows["median s (all / fixed)"].append(
            f"{median([t['seconds'] for t in tasks.values() if t.get('seconds') is not None])}"
            f" / {median([t['seconds'] for t in done if t.get('seconds') is not None])}")
        tin = sum(t.get("tokens_in") or 0 for t in tasks.values())
        tout = sum(t.get("tokens_out") or 0 for t in tasks.values())
        rows["tokens in / out"].append(f"{tin / 1000:,.1f} k / {tout / 1000:,.1f} k")
        # A program one of the two runs did not reach is neither.
        lost = sorted((first & set(tasks)) - fixed)
        gained = sorted(fixed - first - (set(tasks) - set(runs[0][2])))
        rows["gained / lost (against the first)"].append(
            f"+{len(gained)} / −{len(lost)}" + (f" ({', '.join(gained)} / {', '.join(lost)})" if gained or lost else ""))
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(values) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
