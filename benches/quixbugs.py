#!/usr/bin/env python3
"""`fettle fix` on the 40 QuixBugs Python programs: how many it repairs.

What it measures
----------------
QuixBugs (Lin et al., 2017; github.com/jkoppel/QuixBugs, MIT) is 40 small
classic algorithms, each with one defect on one line. For every program
NAME in python_programs/ (helpers node.py and *_test.py left out) this
script builds a fresh workspace holding

  NAME.py        the buggy program, as QuixBugs has it
  test_NAME.py   QuixBugs' own pytest file (python_testcases/test_NAME.py),
                 made to stand alone: the `if pytest.use_correct:` import
                 block becomes `from NAME import NAME`, the JSON cases
                 (json_testcases/NAME.json, one `[args, expected]` a line;
                 args that are not a list are one argument, as tester.py
                 does) are written inline, cases upstream skips unless
                 --runslow (knapsack's 4-minute case, levenshtein's long
                 one) are dropped, and each test gets a 3 s alarm so an
                 infinite loop fails the test instead of hanging the run
  node.py        for the graph programs whose tests import Node

and runs the real binary on it:

  fettle fix --yes --json --test "python3 -m pytest -q test_NAME.py" WS

A task counts as **fixed** only when, after `fettle fix` has exited, this
script itself runs the tests again (with pristine copies of test_NAME.py
and node.py) and they pass; Fettle's own verdict is recorded beside it, as
are its JSON result's iterations, tool calls, tokens in/out and elapsed
time, the wall time, and whether a failed task left NAME.py byte-identical
to the original (rolled back). Reported: fixed X/N and the median wall
seconds per task.

The model
---------
The configuration is written as the *user* file of a private
XDG_CONFIG_HOME (so it is trusted, and no fettle.toml sits in the
workspace for the model to read), with the agent's model named `bench`:

  --model-path GGUF     [models.bench] provider = "local", path = GGUF
                        (its per-request limit total_timeout_ms is raised to
                        the task budget; --context-tokens N sets its window.
                        The agent always samples at temperature 0)
  --model-config FILE   a TOML snippet appended verbatim; it must define
                        [models.bench] (or set [agent] model itself)
  --mock / --mock-script FILE
                        a fresh `fettle mock-model` per task, playing the
                        built-in script (a model that gives up at once) or
                        FILE: checks the plumbing in seconds

[agent] gets timeout_s = --timeout-s (the task budget; the process is
also killed at --timeout-s + 60 s), test_timeout_s = 120 and
protected_paths = ["node.py"] (the test file is protected by Fettle
already, because the test command names it).

QuixBugs itself
---------------
Read from a checkout or a bare git directory (`--quixbugs DIR`), at the
commit this benchmark was built against:

  4257f44b0ff1181dedaedee6a447e133219fcebf

(another commit is used with a warning; the commit read is recorded in the
results). Nothing from QuixBugs is committed to this repository: the
workspaces are built in a temp directory and deleted afterwards
(--keep DIR keeps them).

Reproduce
---------
  git clone https://github.com/jkoppel/QuixBugs /tmp/QuixBugs
  git -C /tmp/QuixBugs checkout 4257f44b0ff1181dedaedee6a447e133219fcebf
  # pytest must be importable by the python3 that runs the tests
  # (test.sh installs it into ~/.cache/fettle-ci/venv; --python picks another)

  # the workspaces are sound: buggy fails, correct_python_programs passes
  python3 benches/quixbugs.py --quixbugs /tmp/QuixBugs --check

  # the harness plumbing, with the mock model (seconds)
  python3 benches/quixbugs.py --quixbugs /tmp/QuixBugs --mock --only gcd,bitcount --markdown

  # the real thing: Qwen2.5-Coder-1.5B on the embedded engine (hours on 2 cores)
  fettle model fetch qwen2.5-coder-1.5b
  python3 benches/quixbugs.py --quixbugs /tmp/QuixBugs \\
      --model-path ~/.cache/fettle/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
      --out quixbugs-qwen1.5b.json --markdown

Usage: python3 benches/quixbugs.py --quixbugs DIR [--check] [--fettle PATH]
           [--model-path GGUF | --model-config FILE | --mock | --mock-script FILE]
           [--timeout-s 600] [--only a,b,c] [--limit N] [--out results.json]
           [--markdown] [--python PY] [--keep DIR] [--context-tokens N]
"""
import argparse
import ast
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PINNED_COMMIT = "4257f44b0ff1181dedaedee6a447e133219fcebf"
DEFAULT_FETTLE = "~/.cache/fettle-ci/target-release/release/fettle"
KILL_GRACE_S = 60
TEST_ALARM_S = 3  # correct programs take < 2 s per case (levenshtein the longest)
# A validation run of one workspace's tests (buggy or correct) must take
# less than this; the benchmark's test runs should be far below Fettle's
# per-run limit.
CHECK_SLOW_S = 20
CHECK_HARD_TIMEOUT_S = 90
RETEST_TIMEOUT_S = 180

# Programs left out of the benchmark, with the reason (filled in from
# --check; empty when every workspace is sound).
EXCLUDED = {}

# The built-in mock script (--mock): the model answers in words, without a
# tool call, every time, so each attempt changes nothing and the task ends
# with gave_up after agent.max_iterations attempts.
MOCK_GIVE_UP = {
    "responses": [
        {"text": "I could not find the defect; I give up.", "repeat": True},
    ]
}

TIME_LIMIT_FIXTURE = '''

@pytest.fixture(autouse=True)
def _time_limit():
    """Fails a test that runs longer than {limit} s (an infinite loop)."""

    def expire(signum, frame):
        raise TimeoutError("the test ran longer than {limit} s (an infinite loop?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, {limit})
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
'''.format(limit=TEST_ALARM_S)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- QuixBugs


class QuixBugs:
    """Files of a QuixBugs checkout or (bare) git directory at one commit."""

    def __init__(self, path):
        self.path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(self.path):
            raise SystemExit(f"--quixbugs {path}: not a directory")
        self.worktree = os.path.isdir(os.path.join(self.path, "python_programs"))
        self.commit = None
        git = self._git("rev-parse", "HEAD", check=False)
        if git is not None:
            self.commit = git.strip()
        if not self.worktree and not self.commit:
            raise SystemExit(f"--quixbugs {path}: neither a QuixBugs checkout (no python_programs/) "
                             "nor a git directory")
        if self.worktree and self.commit:
            dirty = self._git("status", "--porcelain", "--untracked-files=no", check=False)
            self.dirty = bool(dirty and dirty.strip())
        else:
            self.dirty = False

    def _git(self, *args, check=True):
        if self.worktree:
            cmd = ["git", "-C", self.path, *args]
        else:
            cmd = ["git", "--git-dir", self.path, *args]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            if check:
                raise SystemExit(f"{' '.join(cmd)}: {r.stderr.decode(errors='replace').strip()}")
            return None
        return r.stdout.decode()

    def list(self, folder):
        if self.worktree:
            d = os.path.join(self.path, folder)
            return sorted(os.listdir(d)) if os.path.isdir(d) else []
        out = self._git("ls-tree", "--name-only", self.commit, folder + "/", check=False) or ""
        return sorted(os.path.basename(line) for line in out.splitlines() if line)

    def read(self, relpath):
        """The file's text, or None when it does not exist."""
        if self.worktree:
            p = os.path.join(self.path, relpath)
            if not os.path.isfile(p):
                return None
            with open(p, encoding="utf-8") as f:
                return f.read()
        r = subprocess.run(["git", "--git-dir", self.path, "show", f"{self.commit}:{relpath}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return r.stdout.decode("utf-8") if r.returncode == 0 else None

    def programs(self):
        return [n[:-3] for n in self.list("python_programs")
                if n.endswith(".py") and n != "node.py" and not n.endswith("_test.py")]


# ------------------------------------------------------------- workspaces


def flat_imports(src):
    """`from .node import Node`, `from python_programs.node import Node`
    (and the like) → `from node import Node`: the workspace is flat."""
    src = re.sub(r"^(\s*)from\s+\.+\s*(\w+)\s+import", r"\1from \2 import", src, flags=re.MULTILINE)
    src = re.sub(r"^(\s*)from\s+(?:correct_)?python_(?:programs|testcases)\.(\w+)\s+import",
                 r"\1from \2 import", src, flags=re.MULTILINE)
    return src


def load_cases(text):
    cases = []
    for line in text.splitlines():
        if not line.strip():
            continue
        args, expected = json.loads(line)
        if not isinstance(args, list):
            args = [args]  # one argument (tester.py does the same)
        cases.append([args, expected])
    return cases


def py_literal(value):
    """A Python expression for a JSON value, readable where it can be."""
    text = repr(value)
    try:
        if ast.literal_eval(text) == value:
            return text
    except (ValueError, SyntaxError):
        pass
    return "json.loads(%r)" % json.dumps(value)


SKIP_RE = re.compile(
    r"^(?P<indent>[ \t]+)if (?P<cond>.+?):\n(?P=indent)[ \t]+pytest\.skip\([^\n]*\)\n",
    re.MULTILINE | re.DOTALL)


def build_test(name, upstream, cases):
    """test_NAME.py from upstream's, standing alone. Returns (text, dropped
    cases with the reason, notes)."""
    notes = []
    dropped = []
    src = upstream
    # The import of the program under test.
    m = re.search(r"^if pytest\.use_correct:\n(?:[ \t]+[^\n]*\n)+else:\n((?:[ \t]+[^\n]*\n)+)",
                  src, flags=re.MULTILINE)
    if not m:
        raise ValueError("no `if pytest.use_correct:` import block in the upstream test")
    body = "".join(line.strip() + "\n" for line in m.group(1).splitlines())
    src = src[:m.start()] + flat_imports(body) + src[m.end():]
    src = flat_imports(src)
    src = re.sub(r"^from load_testdata import load_json_testcases\n", "", src, flags=re.MULTILINE)

    # Cases upstream skips unless --runslow: drop them, and the skip.
    for sm in list(SKIP_RE.finditer(src)):
        cond = sm.group("cond")
        reason = re.search(r"pytest\.skip\(([^\n]*)\)", sm.group(0)).group(1)

        class _Pytest:
            run_slow = False
            use_correct = False

        keep = []
        for args, expected in cases or []:
            try:
                hit = eval(cond, {"pytest": _Pytest, "float": float},  # QuixBugs' own skip condition
                           {"input_data": args, "expected": expected})
            except Exception as e:  # pragma: no cover
                raise ValueError(f"cannot evaluate the skip condition {cond!r}: {e}")
            if hit:
                dropped.append({"args": _clip(json.dumps(args), 120), "reason": "skipped upstream: " + reason})
            else:
                keep.append([args, expected])
        cases = keep
        notes.append(f"dropped {len(dropped)} case(s) upstream skips without --runslow")
    src = SKIP_RE.sub("", src)
    if re.search(r"pytest\.(use_correct|run_slow)", src):
        raise ValueError("the upstream test still uses pytest.use_correct / pytest.run_slow")

    if cases is not None:
        lines = ["["]
        for args, expected in cases:
            lines.append(f"    [{py_literal(args)}, {py_literal(expected)}],")
        lines.append("]")
        literal = "\n".join(lines)
        src, n = re.subn(r"load_json_testcases\([^)]*\)", lambda _m: literal, src)
        if n != 1:
            raise ValueError(f"expected one load_json_testcases(...) call, found {n}")
    elif "load_json_testcases" in src:
        raise ValueError("the upstream test loads JSON cases, but json_testcases/%s.json is missing" % name)

    header = ("# From QuixBugs (github.com/jkoppel/QuixBugs, MIT), python_testcases/test_%s.py,\n"
              "# made to stand alone for benches/quixbugs.py.\n" % name)
    if "json.loads(" in src and not re.search(r"^import json$", src, flags=re.MULTILINE):
        header += "import json\n"
    header += "import signal\n"
    src = src.lstrip("\n")
    if not re.search(r"^import pytest$", src, flags=re.MULTILINE):
        src = "import pytest\n" + src
    # The time limit goes right after the imports (the first blank line
    # after the last import at the top).
    lines = src.split("\n")
    last_import = 0
    for i, line in enumerate(lines):
        if re.match(r"(import|from)\s", line):
            last_import = i
        elif line.strip() and not line.startswith("#") and i > last_import:
            break
    src = "\n".join(lines[:last_import + 1]) + "\n" + TIME_LIMIT_FIXTURE + "\n" + \
        "\n".join(lines[last_import + 1:])
    src = re.sub(r"\n{4,}", "\n\n\n", src)
    return header + src, dropped, notes


def fallback_test(name, cases):
    """A test for a program whose upstream test file is missing."""
    lines = ["import json", "import signal", "", "import pytest", f"from {name} import {name}", TIME_LIMIT_FIXTURE, "", "testdata = ["]
    for args, expected in cases:
        lines.append(f"    [{py_literal(args)}, {py_literal(expected)}],")
    lines += ["]", "", "",
              '@pytest.mark.parametrize("input_data,expected", testdata)',
              f"def test_{name}(input_data, expected):",
              f"    result = {name}(*input_data)",
              "    if hasattr(result, '__next__'):",
              "        result = list(result)",
              "    assert result == expected", ""]
    return "\n".join(lines)


class Task:
    """One program's files: buggy, correct, test, node.py."""

    def __init__(self, qb, name):
        self.name = name
        self.notes = []
        self.dropped = []
        self.error = None
        self.buggy = qb.read(f"python_programs/{name}.py")
        correct = qb.read(f"correct_python_programs/{name}.py")
        self.correct = flat_imports(correct) if correct is not None else None
        self.buggy = flat_imports(self.buggy)
        json_text = qb.read(f"json_testcases/{name}.json")
        cases = load_cases(json_text) if json_text is not None else None
        upstream = qb.read(f"python_testcases/test_{name}.py")
        try:
            if upstream is not None:
                self.test, self.dropped, self.notes = build_test(name, upstream, cases)
            elif cases is not None:
                self.test = fallback_test(name, cases)
                self.notes.append("no upstream test file: a generic test from the JSON cases")
            else:
                raise ValueError("neither python_testcases/test_%s.py nor json_testcases/%s.json" % (name, name))
        except ValueError as e:
            self.test = None
            self.error = str(e)
        self.cases = len(cases) - len(self.dropped) if cases is not None else None
        self.node = None
        needs_node = re.compile(r"^\s*(from\s+node\s+import|import\s+node\b)", re.MULTILINE)
        if (self.test and needs_node.search(self.test)) or needs_node.search(self.buggy):
            node = qb.read("python_testcases/node.py") or qb.read("python_programs/node.py")
            if node is None:
                self.error = "the test imports node, and QuixBugs has no node.py"
            self.node = node

    @property
    def test_file(self):
        return f"test_{self.name}.py"

    def files(self, correct=False):
        files = {f"{self.name}.py": self.correct if correct else self.buggy,
                 self.test_file: self.test}
        if self.node is not None:
            files["node.py"] = self.node
        return files

    def write(self, ws, correct=False):
        os.makedirs(ws, exist_ok=True)
        for rel, text in self.files(correct).items():
            with open(os.path.join(ws, rel), "w", encoding="utf-8") as f:
                f.write(text)


# ------------------------------------------------------------------ tests


def find_python(choice):
    """A python3 that can import pytest, and the PATH entry that makes
    `python3` be it."""
    candidates = [choice] if choice else [
        sys.executable,
        os.path.expanduser("~/.cache/fettle-ci/venv/bin/python3"),
        shutil.which("python3") or "python3",
    ]
    for py in candidates:
        py = os.path.expanduser(py)
        if not os.path.isabs(py):
            py = shutil.which(py) or py
        bindir = os.path.dirname(py)
        python3 = os.path.join(bindir, "python3")
        if not os.path.exists(python3):
            continue
        r = subprocess.run([python3, "-m", "pytest", "--version"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode == 0:
            return python3, bindir, r.stdout.decode().strip()
    raise SystemExit("no python3 with pytest found (tried %s); install pytest, or --python PY "
                     "(a python whose directory has a python3 with pytest)" % ", ".join(candidates))


def test_env(bindir):
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)
    return env


def limit_memory():
    try:
        import resource
        four_gib = 4 << 30
        resource.setrlimit(resource.RLIMIT_AS, (four_gib, four_gib))
    except (ImportError, ValueError, OSError):
        pass


def run_tests(ws, task, env, timeout):
    """Runs the test command in ws. Returns (rc or None on timeout, seconds, tail of the output)."""
    cmd = ["python3", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", task.test_file]
    start = time.monotonic()
    p = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, preexec_fn=limit_memory)
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, _ = p.communicate()
        rc = None
    return rc, time.monotonic() - start, _clip(out.decode(errors="replace"), 1500, tail=True)


def kill_group(p):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _clip(text, n, tail=False):
    if len(text) <= n:
        return text
    return ("…" + text[-n:]) if tail else (text[:n] + "…")


def check(tasks, env, workdir, keep=None):
    """Buggy must fail, correct must pass, both quickly. Returns {name: reason} of the unsound.
    keep: a directory to leave each workspace in (with the buggy program)."""
    bad = {}
    for t in tasks:
        if t.error:
            bad[t.name] = t.error
            log(f"  {t.name:28} INVALID: {t.error}")
            continue
        if t.correct is None:
            bad[t.name] = "no correct_python_programs/%s.py" % t.name
            log(f"  {t.name:28} INVALID: {bad[t.name]}")
            continue
        ws = os.path.join(workdir, "check", t.name)
        shutil.rmtree(ws, ignore_errors=True)
        t.write(ws, correct=False)
        b_rc, b_s, b_out = run_tests(ws, t, env, CHECK_HARD_TIMEOUT_S)
        t.write(ws, correct=True)
        c_rc, c_s, c_out = run_tests(ws, t, env, CHECK_HARD_TIMEOUT_S)
        problems = []
        if b_rc == 0:
            problems.append("the buggy program passes the tests")
        elif b_rc is None:
            problems.append(f"the buggy program's tests hang (killed after {CHECK_HARD_TIMEOUT_S} s)")
        elif b_rc not in (1,):
            problems.append(f"the buggy program's test run exits {b_rc} (not a test failure): {b_out}")
        if c_rc != 0:
            problems.append(f"the correct program fails the tests (exit {c_rc}): {c_out}")
        for label, s in (("buggy", b_s), ("correct", c_s)):
            if s > CHECK_SLOW_S:
                problems.append(f"the {label} run takes {s:.1f} s (over {CHECK_SLOW_S} s)")
        failing = re.findall(r"^FAILED (\S+)", b_out, flags=re.MULTILINE)
        what = (failing[0].split("::", 1)[-1] if failing else "") if b_rc == 1 else ""
        extra = f"; dropped {len(t.dropped)} slow case(s)" if t.dropped else ""
        cases = f"{t.cases} cases" if t.cases is not None else "graph tests"
        status = "ok" if not problems else "INVALID: " + "; ".join(problems)
        log(f"  {t.name:28} {status}  ({cases}{extra}; buggy {b_s:.1f} s, fails {what or '-'}; correct {c_s:.1f} s)")
        if problems:
            bad[t.name] = "; ".join(problems)
        if keep:
            t.write(os.path.join(os.path.expanduser(keep), t.name), correct=False)
        shutil.rmtree(ws, ignore_errors=True)
    return bad


# ---------------------------------------------------------------- fettle


def start_mock(fettle, script_path, record_path):
    p = subprocess.Popen([fettle, "mock-model", "--script", script_path, "--port", "0",
                          "--record", record_path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    line = p.stdout.readline().decode().strip()
    m = re.match(r"listening on (http://\S+)", line)
    if not m:
        kill_group(p)
        raise SystemExit(f"fettle mock-model did not start: {line!r} {p.stderr.read().decode()[:500]}")
    return p, m.group(1)


def config_text(args, mock_url=None):
    parts = []
    if mock_url:
        parts.append(f'[models.bench]\nprovider = "openai"\nbase_url = "{mock_url}/v1"\n'
                     f'model = "mock-coder"\nmax_retries = 0\ntimeout_ms = 30000\n')
    elif args.model_path:
        path = os.path.abspath(os.path.expanduser(args.model_path))
        lines = ['[models.bench]', 'provider = "local"', f'path = {json.dumps(path)}',
                 f'total_timeout_ms = {int(args.timeout_s * 1000)}']
        if args.context_tokens:
            lines.append(f"context_tokens = {args.context_tokens}")
        parts.append("\n".join(lines) + "\n")
    agent = ["[agent]"]
    user = ""
    if args.model_config:
        with open(os.path.expanduser(args.model_config), encoding="utf-8") as f:
            user = f.read()
    if not re.search(r"^\s*\[agent\]", user, flags=re.MULTILINE):
        agent.append('model = "bench"')
        agent += [f"timeout_s = {int(args.timeout_s)}", "test_timeout_s = 120",
                  'protected_paths = ["node.py"]']
        parts.append("\n".join(agent) + "\n")
    else:
        log("--model-config has its own [agent] table: timeout_s, test_timeout_s and protected_paths "
            "are not written; set them there")
    if user:
        parts.append("# --model-config %s\n%s" % (args.model_config, user))
    return "\n".join(parts)


def parse_result(stdout):
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for line in reversed(text.splitlines()):  # the JSON alone on its last line
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def run_fettle(cmd, cwd, env, out_path, err_path, timeout):
    """Runs `fettle fix` in its own process group, stdout and stderr to
    files, killed (the group) at `timeout`. Returns (exit code, killed, seconds)."""
    start = time.monotonic()
    killed = False
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
            kill_group(p)
            rc = p.returncode
    return rc, killed, time.monotonic() - start


def keep_task(tdir, keep, name):
    """Moves a task's folder (workspace, logs, config) under `keep`/`name`
    when --keep was given, and deletes it."""
    if keep:
        dest = os.path.join(os.path.expanduser(keep), name)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(tdir, dest, symlinks=True)
    shutil.rmtree(tdir, ignore_errors=True)


def check_fettle_and_model(args):
    """--fettle made absolute and executable, --model-path a file: or exit."""
    args.fettle = os.path.abspath(os.path.expanduser(args.fettle))
    if not os.access(args.fettle, os.X_OK):
        raise SystemExit(f"--fettle {args.fettle}: not an executable")
    if getattr(args, "model_path", None) and not os.path.isfile(os.path.expanduser(args.model_path)):
        raise SystemExit(f"--model-path {args.model_path}: no such file")


def run_task(t, args, env, workdir, mock_script):
    tdir = os.path.join(workdir, "run", t.name)
    shutil.rmtree(tdir, ignore_errors=True)
    ws = os.path.join(tdir, "ws")
    t.write(ws)
    originals = {rel: text.encode("utf-8") for rel, text in t.files().items()}
    mock = None
    mock_url = None
    if mock_script:
        mock, mock_url = start_mock(args.fettle, mock_script, os.path.join(tdir, "mock-requests.jsonl"))
    config_home = os.path.join(tdir, "config")
    os.makedirs(os.path.join(config_home, "fettle"))
    config = config_text(args, mock_url)
    with open(os.path.join(config_home, "fettle", "config.toml"), "w") as f:
        f.write(config)
    fenv = dict(env)
    fenv["FETTLE_CACHE_DIR"] = os.path.join(tdir, "cache")
    fenv["XDG_CONFIG_HOME"] = config_home
    fenv.pop("FETTLE_LOG", None)
    if args.fettle_log:
        fenv["FETTLE_LOG"] = args.fettle_log
    test_cmd = f"python3 -m pytest -q {t.test_file}"
    cmd = [args.fettle, "fix", "--yes", "--json", "--test", test_cmd, ws]
    if args.candidates:
        cmd[2:2] = ["--candidates", str(args.candidates)]
    if args.plan:
        cmd[2:2] = ["--plan"]
    if args.review:
        cmd[2:2] = ["--review"]
    out_path = os.path.join(tdir, "stdout.json")
    err_path = os.path.join(tdir, "stderr.log")
    rc, killed, seconds = run_fettle(cmd, ws, fenv, out_path, err_path, args.timeout_s + args.kill_grace_s)
    if mock:
        kill_group(mock)
    with open(out_path, encoding="utf-8", errors="replace") as f:
        stdout = f.read()
    with open(err_path, encoding="utf-8", errors="replace") as f:
        stderr = f.read()
    result = parse_result(stdout)

    # Our own verdict, with pristine tests.
    touched = []
    for rel, data in originals.items():
        path = os.path.join(ws, rel)
        try:
            with open(path, "rb") as f:
                now = f.read()
        except OSError:
            now = None
        if now != data:
            touched.append(rel)
    program_rel = f"{t.name}.py"
    tampered = [rel for rel in touched if rel != program_rel]
    for rel in tampered:
        with open(os.path.join(ws, rel), "wb") as f:
            f.write(originals[rel])
    rc_tests, test_s, test_out = run_tests(ws, t, env, RETEST_TIMEOUT_S)
    fixed = rc_tests == 0
    program_changed = program_rel in touched
    other_files = sorted(
        os.path.relpath(os.path.join(d, n), ws)
        for d, dirs, names in os.walk(ws)
        for n in names
        if not any(part in ("__pycache__", ".pytest_cache", ".fettle") for part in os.path.relpath(d, ws).split(os.sep))
        and os.path.relpath(os.path.join(d, n), ws) not in originals
    )
    final_program = None
    if program_changed:
        try:
            with open(os.path.join(ws, program_rel), encoding="utf-8", errors="replace") as f:
                final_program = f.read()
        except OSError:
            pass

    r = result or {}
    tokens = r.get("tokens") or {}
    record = {
        "program": t.name,
        "fixed": fixed,
        "seconds": round(seconds, 1),
        "fettle_exit": rc,
        "killed_at_timeout": killed,
        "status": r.get("status") if result else ("killed" if killed else "no-json"),
        "iterations": r.get("iterations"),
        "tool_calls": r.get("toolCalls"),
        "tokens_in": tokens.get("input"),
        "tokens_out": tokens.get("output"),
        "elapsed_ms": r.get("elapsedMs"),
        "changed_files": r.get("changedFiles"),
        "program_changed": program_changed,
        "rolled_back": (not fixed and not program_changed) if not fixed else None,
        "tests_tampered": tampered,
        "new_files": other_files,
        "retest_exit": rc_tests,
        "retest_seconds": round(test_s, 1),
        "retest_output": test_out if not fixed else None,
        "candidates": r.get("candidates"),
        "plan": r.get("plan"),
        "review": r.get("review"),
        "summary": _clip(r.get("summary") or "", 4000) if result else None,
        "diff": _clip(r.get("diff") or "", 8000) if result else None,
        "final_program": _clip(final_program, 8000) if (final_program is not None and not fixed) else None,
        "stdout": None if result else _clip(stdout, 2000, tail=True),
        "stderr_tail": _clip(stderr, 3000, tail=True),
    }
    if result and r.get("status") == "success" and not fixed:
        record["note"] = "fettle said success, but the tests fail when run again"
    keep_task(tdir, args.keep, t.name)
    return record


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def markdown(records):
    rows = ["| program | fixed | seconds | iterations | tool calls | tokens in/out | status |",
            "|---|---|---:|---:|---:|---:|---|"]
    for r in records:
        def v(x):
            return "–" if x is None else str(x)
        status = r["status"]
        if not r["fixed"] and r["status"] not in ("killed", "no-json"):
            status += " (rolled back)" if r.get("rolled_back") else " (changed)"
        if r.get("note"):
            status += "; " + r["note"]
        rows.append(f"| {r['program']} | {'yes' if r['fixed'] else 'no'} | {r['seconds']:.1f} | "
                    f"{v(r['iterations'])} | {v(r['tool_calls'])} | {v(r['tokens_in'])}/{v(r['tokens_out'])} | "
                    f"{status} |")
    return "\n".join(rows)


def summarize(records, total):
    fixed = sum(1 for r in records if r["fixed"])
    secs = [r["seconds"] for r in records]
    med = statistics.median(secs) if secs else 0.0
    agree = sum(1 for r in records if (r["status"] == "success") == r["fixed"])
    return {"fixed": fixed, "ran": len(records), "planned": total,
            "median_seconds": round(med, 1),
            "fettle_verdict_agrees": agree,
            "line": f"fixed {fixed}/{len(records)}, median {med:.1f} s"
                    + (f" ({total - len(records)} not run)" if total != len(records) else "")}


# ------------------------------------------------------------------ main


def wait_while_paused(out):
    """Between tasks, while OUT.pause exists: a build or test on the same
    cores would slow the model several times over, so pause the run
    rather than share the machine (touch it, wait for the task to end,
    work, remove it)."""
    if not out:
        return
    pause = out + ".pause"
    announced = False
    while os.path.exists(pause):
        if not announced:
            log(f"paused ({pause} exists)")
            announced = True
        time.sleep(2)
    if announced:
        log("resumed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quixbugs", required=True, metavar="DIR",
                    help="a QuixBugs checkout, or its git directory (read with git show)")
    ap.add_argument("--check", action="store_true",
                    help="only validate the workspaces (buggy fails, correct passes) and exit")
    ap.add_argument("--fettle", default=DEFAULT_FETTLE, metavar="PATH")
    model = ap.add_mutually_exclusive_group()
    model.add_argument("--model-path", metavar="GGUF", help="a local GGUF for the agent ([models.bench] provider = \"local\")")
    model.add_argument("--model-config", metavar="FILE", help="a TOML snippet appended verbatim to the configuration")
    model.add_argument("--mock", action="store_true", help="a fresh mock model per task that gives up at once")
    model.add_argument("--mock-script", metavar="FILE", help="a fresh mock model per task playing this script")
    ap.add_argument("--context-tokens", type=int, help="with --model-path: models.bench.context_tokens")
    ap.add_argument("--timeout-s", type=float, default=600, help="task budget (agent.timeout_s); killed at +60 s")
    ap.add_argument("--kill-grace-s", type=float, default=KILL_GRACE_S, help=argparse.SUPPRESS)
    ap.add_argument("--candidates", type=int, metavar="N", help="fettle fix --candidates N (candidate fixes per attempt)")
    ap.add_argument("--plan", action="store_true", help="fettle fix --plan (a plan first, executed and revised)")
    ap.add_argument("--review", action="store_true", help="fettle fix --review (a review before success)")
    ap.add_argument("--only", metavar="a,b,c", help="these programs only")
    ap.add_argument("--limit", type=int, metavar="N", help="the first N programs only")
    ap.add_argument("--out", metavar="FILE", help="results JSON, rewritten after every task")
    ap.add_argument("--markdown", action="store_true", help="print a table of the tasks")
    ap.add_argument("--python", metavar="PY", help="the python3 (with pytest) that runs the tests")
    ap.add_argument("--keep", metavar="DIR", help="keep each task's workspace, logs and config here")
    ap.add_argument("--fettle-log", metavar="DIRECTIVE",
                    help="FETTLE_LOG for fettle fix (e.g. fettle::model=debug: the engine's prefill and "
                         "generation times per turn in each task's stderr.log, with --keep)")
    ap.add_argument("--include-excluded", action="store_true", help="also run the programs excluded as unsound")
    args = ap.parse_args()

    qb = QuixBugs(args.quixbugs)
    commit = qb.commit or "unknown (a checkout without git)"
    log(f"QuixBugs {qb.path} at {commit}{' (with local changes)' if qb.dirty else ''}")
    if qb.commit != PINNED_COMMIT:
        log(f"warning: the benchmark is pinned to QuixBugs {PINNED_COMMIT}; this is {commit}")

    names = qb.programs()
    if len(names) != 40:
        log(f"warning: {len(names)} programs in python_programs/ (40 expected)")
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise SystemExit(f"--only: no such program(s): {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    if args.limit is not None:
        names = names[:args.limit]

    python3, bindir, pytest_version = find_python(args.python)
    env = test_env(bindir)
    log(f"tests run with {python3} ({pytest_version})")
    tasks = [Task(qb, n) for n in names]
    workdir = tempfile.mkdtemp(prefix="fettle-quixbugs-")
    try:
        if args.check:
            log(f"checking {len(tasks)} workspaces: the buggy program must fail, the correct one pass")
            bad = check(tasks, env, workdir, args.keep)
            log(f"check: {len(tasks) - len(bad)}/{len(tasks)} valid")
            for n, why in bad.items():
                log(f"  excluded {n}: {why}")
            if args.out:
                write_json(args.out, {"benchmark": "quixbugs-python", "mode": "check",
                                      "quixbugs_commit": qb.commit, "valid": len(tasks) - len(bad),
                                      "invalid": bad})
            return 1 if bad else 0

        args.fettle = os.path.abspath(os.path.expanduser(args.fettle))
        if not os.access(args.fettle, os.X_OK):
            raise SystemExit(f"--fettle {args.fettle}: not an executable")
        if not (args.model_path or args.model_config or args.mock or args.mock_script):
            raise SystemExit("say which model: --model-path GGUF, --model-config FILE, --mock or --mock-script FILE")
        if args.model_path and not os.path.isfile(os.path.expanduser(args.model_path)):
            raise SystemExit(f"--model-path {args.model_path}: no such file")
        mock_script = None
        if args.mock:
            mock_script = os.path.join(workdir, "mock-give-up.json")
            write_json(mock_script, MOCK_GIVE_UP)
        elif args.mock_script:
            mock_script = os.path.abspath(os.path.expanduser(args.mock_script))
        version = subprocess.run([args.fettle, "--version"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT).stdout.decode().strip()

        excluded = {}
        for t in tasks:
            if t.name in EXCLUDED and not args.include_excluded:
                excluded[t.name] = EXCLUDED[t.name]
            elif t.error:
                excluded[t.name] = t.error
        for n, why in excluded.items():
            log(f"excluded {n}: {why}")
        todo = [t for t in tasks if t.name not in excluded]
        model_desc = ("mock (built-in give-up script)" if args.mock else
                      f"mock script {mock_script}" if mock_script else
                      f"local {os.path.abspath(os.path.expanduser(args.model_path))}" if args.model_path else
                      f"--model-config {args.model_config}")
        report = {
            "benchmark": "quixbugs-python",
            "quixbugs_commit": qb.commit,
            "quixbugs_dirty": qb.dirty,
            "fettle": args.fettle,
            "fettle_version": version,
            "model": model_desc,
            "config": config_text(args, "http://127.0.0.1:PORT" if mock_script else None),
            "test_command": "python3 -m pytest -q test_NAME.py",
            "python": f"{python3} ({pytest_version})",
            "timeout_s": args.timeout_s,
            "cpus": os.cpu_count(),
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "excluded": excluded,
            "tasks": [],
        }
        log(f"{len(todo)} task(s), model: {model_desc}, budget {args.timeout_s:g} s each")
        for i, t in enumerate(todo, 1):
            wait_while_paused(args.out)
            log(f"[{i}/{len(todo)}] {t.name} …")
            rec = run_task(t, args, env, workdir, mock_script)
            if rec["fettle_exit"] == 2 and rec["status"] == "no-json":
                # A usage or configuration error: every task would end the same way.
                raise SystemExit("fettle fix exited 2 (usage or configuration error):\n" + rec["stderr_tail"])
            report["tasks"].append(rec)
            report["summary"] = summarize(report["tasks"], len(todo))
            if args.out:
                write_json(args.out, report)
            tok = f"{rec['tokens_in']}/{rec['tokens_out']}" if rec["tokens_in"] is not None else "-"
            log(f"[{i}/{len(todo)}] {t.name}: {'FIXED' if rec['fixed'] else 'not fixed'} "
                f"(fettle: {rec['status']}, exit {rec['fettle_exit']}, {rec['iterations']} iteration(s), "
                f"{rec['tool_calls']} tool call(s), tokens {tok}, {rec['seconds']:.1f} s"
                f"{', program rolled back' if rec.get('rolled_back') else ''}"
                f"{', KILLED at the time limit' if rec['killed_at_timeout'] else ''})")
        report["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if args.out:
            write_json(args.out, report)
        if args.markdown:
            print(markdown(report["tasks"]))
        print(summarize(report["tasks"], len(todo))["line"] if report["tasks"] else "nothing run")
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
