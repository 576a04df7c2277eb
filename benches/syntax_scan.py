#!/usr/bin/env python3
"""False alarms of Fettle's syntax errors on Python's standard library.

Runs examples/syntax_scan.rs on the library's .py files and asks CPython
which of them compile: an error Fettle reports in a file that compiles is a
false alarm (a diagnostic nobody can fix, an edit the guards refuse); a
file CPython rejects that Fettle passes is a miss.

    python3 benches/syntax_scan.py [--lib DIR] [--scan BIN]

--scan is a built examples/syntax_scan (default: cargo run --release).
"""
import argparse
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path


def compiles(path: Path) -> bool:
    try:
        source = path.read_bytes()
    except OSError:
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--scan", help="a built examples/syntax_scan binary")
    args = parser.parse_args()
    lib = Path(args.lib)
    command = (
        [args.scan, str(lib)]
        if args.scan
        else ["cargo", "run", "-q", "--release", "--example", "syntax_scan", "--", str(lib)]
    )
    scan = subprocess.run(command, capture_output=True, text=True, check=True)
    flagged = {}
    for line in scan.stdout.splitlines():
        path, count, first = line.split("\t", 2)
        if path.endswith(".py"):
            flagged[Path(path)] = (int(count), first)
    files = sorted(p for p in lib.rglob("*.py") if p.is_file())
    valid = {p for p in files if compiles(p)}
    false_alarms = sorted(p for p in flagged if p in valid)
    missed = sorted(p for p in files if p not in valid and p not in flagged)
    caught = sorted(p for p in flagged if p not in valid)
    print(f"{lib}: {len(files)} .py files, {len(valid)} compile")
    print(f"false alarms (compile, Fettle reports an error): {len(false_alarms)}")
    for path in false_alarms:
        count, first = flagged[path]
        print(f"  {path.relative_to(lib)}: {count} ({first})")
    print(f"rejected by CPython and reported: {len(caught)}; not reported: {len(missed)}")
    for path in missed:
        print(f"  missed: {path.relative_to(lib)}")
    print(scan.stderr.strip(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
