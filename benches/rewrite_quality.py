#!/usr/bin/env python3
"""`fettle.rewrite` "Add documentation" and "Simplify" on 20 QuixBugs
programs, over the real server (`fettle serve` on stdio): how often the
rewrite is applied, and whether what it leaves behind is right.

What it measures
----------------
The programs: the first 20 (by name) of QuixBugs' correct_python_programs/
that have JSON test cases (json_testcases/NAME.json): bitcount to
next_permutation. Each gets a workspace built by benches/quixbugs.py (this
script imports it: NAME.py is the *correct* program, test_NAME.py QuixBugs'
own test made to stand alone, node.py where needed).

For each program and instruction, a fresh workspace (the file on disk is
the original), a fresh `fettle serve` and a client that behaves like an
editor:

  initialize (the model through initializationOptions, as the e2e tests
  do), didOpen NAME.py, textDocument/codeAction on the selection — the
  lines of `def NAME(...)` found with `ast` (lineno..end_lineno; LSP range
  from the def's line, character 0, to the start of the line after) —, and
  the server's own preset "Fettle: Add documentation" / "Fettle: Simplify"
  (their instruction texts are the default edit.actions; the command's
  arguments {uri, range, version, instruction} are sent as listed), then
  workspace/executeCommand fettle.rewrite. The server's
  workspace/applyEdit is applied to the client's buffer (versions checked,
  positions in the negotiated encoding) and answered {applied: true};
  workspace/configuration, window/workDoneProgress/create and the like
  are answered like a quiet editor.

Recorded per rewrite: applied, the server's summary and taskId, seconds
(executeCommand sent → answered; with a local model this includes loading
the weights, from the page cache after the first; a rewrite the client
gave up on counts at --timeout-s), the refusal reason (`fettle/stats`
edit.refused), the model's streamed text (`fettle/taskEvent`s; when the
server retried, both answers run together), the unified diff, and, when
applied, on the resulting buffer:

  parses           ast.parse succeeds
  code_unchanged   (Add documentation) ast.dump of the module with every
                   docstring removed (a first-statement string constant of
                   a module, function or class body) equals the original's
                   likewise — comments are invisible to ast already
  documented       (Add documentation) `def NAME` has a docstring
  tests_pass       the buffer written to NAME.py in its workspace and
                   `python3 -m pytest -q test_NAME.py` run (timeout
                   --test-timeout-s); reported for Simplify, recorded for
                   both
  code_changed     (Simplify) the module's ast differs from the original's

Before the rewrites each program's original passes its own tests (checked,
recorded as original_tests_pass).

Summary, per instruction: applied X/N, code unchanged X/N (documentation),
tests pass X/N (simplify), median seconds; N counts every rewrite asked
for, so a refusal counts against every rate.

The model
---------
  --model-path GGUF   [models.bench] provider = "local", path = GGUF,
                      total_timeout_ms = --timeout-s; --context-tokens N
                      sets its window (default: the server's, 4096);
                      edit.model = "bench"
  --mock              a fresh `fettle mock-model` per rewrite that answers
                      with a plausible fenced block: the function with a
                      docstring line added (documentation) or as
                      ast.unparse writes it (simplify). Plumbing only, in
                      seconds. --mock-prose NAMES (default gcd) answer in
                      prose without code (a refusal); --mock-wrong NAMES
                      (default bitcount) answer with code that changes
                      what the function does (`return None`): code changed
                      / tests fail

Completion is disabled (no warm-up of the embedded model competes with
the rewrite) and models.local.auto_fetch is off (nothing is downloaded).
The server runs with a private XDG_CONFIG_HOME and FETTLE_CACHE_DIR, so
no user configuration applies. The client waits --timeout-s (300) for each
fettle.rewrite, then cancels it ($/cancelRequest) and records a timeout.

Reproduce
---------
  # QuixBugs at the pinned commit (a checkout or a bare git directory)
  git clone https://github.com/jkoppel/QuixBugs /tmp/QuixBugs
  git -C /tmp/QuixBugs checkout 4257f44b0ff1181dedaedee6a447e133219fcebf
  # pytest must be importable by the python3 that runs the tests
  # (test.sh installs it into ~/.cache/fettle-ci/venv; --python picks another)
  # the release binary: cargo build --release (test.sh builds it into
  # ~/.cache/fettle-ci/target-release/release/fettle, the default --fettle)

  # the plumbing, with the mock model (about a minute)
  python3 benches/rewrite_quality.py --quixbugs /tmp/QuixBugs --mock --markdown

  # the real thing: Qwen2.5-Coder-1.5B on the embedded engine
  fettle model fetch qwen2.5-coder-1.5b
  python3 benches/rewrite_quality.py --quixbugs /tmp/QuixBugs \\
      --model-path ~/.cache/fettle/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
      --out rewrite-quality-qwen1.5b.json --markdown

Usage: python3 benches/rewrite_quality.py --quixbugs DIR (--model-path GGUF | --mock)
           [--instruction doc|simplify|both] [--context-tokens N] [--fettle PATH]
           [--only a,b,c] [--limit N] [--out results.json] [--markdown]
           [--timeout-s 300] [--test-timeout-s 120] [--python PY] [--keep DIR]
           [--mock-prose a,b] [--mock-wrong a,b]
"""
import argparse
import ast
import datetime
import difflib
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no benches/__pycache__ in the source tree
import quixbugs as qb  # noqa: E402  (benches/quixbugs.py: the QuixBugs workspaces)

PROGRAMS = 20
DEFAULT_FETTLE = "~/.cache/fettle-ci/target-release/release/fettle"
# The presets asked for: their titles as the server lists them. The
# instruction texts come from the server's code actions; these are the
# default edit.actions as this script was written (a difference is warned
# about and recorded, the server's text is used).
PRESETS = {
    "doc": ("Fettle: Add documentation",
            "Add documentation comments (docstrings or doc comments, in this language's usual style) "
            "to the definitions in this code. Do not change the code itself."),
    "simplify": ("Fettle: Simplify",
                 "Simplify this code: make it shorter and clearer without changing what it does."),
}
LABEL = {"doc": "Add documentation", "simplify": "Simplify"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def clip(text, n, tail=False):
    return qb._clip(text, n, tail) if text is not None else None


# ------------------------------------------------------------- programs


def program_names(repo):
    """The first PROGRAMS programs of correct_python_programs/ with JSON cases."""
    have_json = {n[:-5] for n in repo.list("json_testcases") if n.endswith(".json")}
    names = sorted(n[:-3] for n in repo.list("correct_python_programs")
                   if n.endswith(".py") and n != "node.py" and not n.endswith("_test.py"))
    return [n for n in names if n in have_json][:PROGRAMS]


def main_function(src, name):
    """The module-level `def name` (else the first def): its node."""
    tree = ast.parse(src)
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for n in defs:
        if n.name == name:
            return n
    if defs:
        return defs[0]
    raise ValueError(f"no function in {name}.py")


def selection(src, fn):
    """The LSP range of fn's whole lines: from its first line (its first
    decorator's), character 0, to the start of the line after it (the
    end of the text when there is none)."""
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    lines = src.split("\n")  # a final "\n" leaves an empty last element
    if fn.end_lineno < len(lines):
        end = {"line": fn.end_lineno, "character": 0}
    else:
        end = {"line": fn.end_lineno - 1, "character": len(lines[fn.end_lineno - 1])}
    return {"start": {"line": first - 1, "character": 0}, "end": end}


def strip_docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:]
    return tree


def code_dump(src, docstrings=True):
    tree = ast.parse(src)
    return ast.dump(tree if docstrings else strip_docstrings(tree))


# ------------------------------------------------------------------ mock


def mock_answer(src, fn, instruction, prose=False, wrong=False):
    """What the mock model answers for this rewrite: a plausible chat
    answer with one fenced block (or prose alone)."""
    if prose:
        return ("I looked at this function carefully. It is already short and clear, and its "
                "behaviour is easy to follow, so I would not change anything about it.")
    lines = src.split("\n")
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    selected = lines[first - 1:fn.end_lineno]
    indent = " " * fn.body[0].col_offset
    body_line = fn.body[0].lineno - first  # index in `selected` of the first statement
    if wrong:
        code = selected[:body_line] + [indent + "return None"]
        if instruction == "doc":
            code.insert(body_line, f'{indent}"""Returns nothing (the mock changed the code)."""')
    elif instruction == "doc":
        code = list(selected)
        code.insert(body_line, f'{indent}"""{fn.name.replace("_", " ").capitalize()}: '
                               f'documented by the mock model."""')
    else:
        pad = " " * fn.col_offset
        code = [pad + line if line else line for line in ast.unparse(fn).split("\n")]
        if [line.rstrip() for line in code] == [line.rstrip() for line in selected if line.strip()]:
            # Already as ast.unparse writes it: a comment, so the answer
            # is not refused as unchanged.
            code.insert(1 + len(fn.decorator_list), pad + "    # Already as simple as it gets.")
    what = "documented" if instruction == "doc" else "simplified"
    return ("Sure! Here is the %s function:\n\n```python\n%s\n```\n\nThe behaviour is unchanged."
            % (what, "\n".join(code)))


def start_mock(fettle, answer, tdir):
    script = os.path.join(tdir, "mock-script.json")
    with open(script, "w") as f:
        json.dump({"responses": [{"text": answer, "repeat": True}]}, f)
    return qb.start_mock(fettle, script, os.path.join(tdir, "mock-requests.jsonl"))


def model_calls(tdir):
    try:
        with open(os.path.join(tdir, "mock-requests.jsonl")) as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return None


# ------------------------------------------------------------ LSP client


def frame(msg):
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def to_offset(text, pos, encoding):
    """An LSP position in `text` → a str index (clamped to the line/text)."""
    line, character = pos["line"], pos["character"]
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = starts[line + 1] - 1 if line + 1 < len(starts) else len(text)
    units = 0
    i = start
    while i < end and units < character:
        ch = text[i]
        if encoding == "utf-8":
            units += len(ch.encode("utf-8"))
        elif encoding == "utf-32":
            units += 1
        else:
            units += 2 if ord(ch) > 0xFFFF else 1
        i += 1
    return i


class Server:
    """`fettle serve` on stdio, driven like an editor."""

    def __init__(self, fettle, ws, options, tdir):
        env = dict(os.environ, FETTLE_LOG=os.environ.get("FETTLE_LOG", "info"),
                   XDG_CONFIG_HOME=os.path.join(tdir, "config"),
                   FETTLE_CACHE_DIR=os.path.join(tdir, "cache"))
        os.makedirs(env["XDG_CONFIG_HOME"], exist_ok=True)
        self.stderr_path = os.path.join(tdir, "server-stderr.log")
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([fettle, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env, cwd=ws, start_new_session=True)
        self.ws = ws
        self.options = options
        self.inbox = queue.Queue()
        self.next_id = 1
        self.encoding = "utf-16"
        self.buffers = {}            # uri -> [version, text]
        self.server_requests = []    # (method, params) of every server request
        self.apply_answers = []      # what this client answered each workspace/applyEdit
        self.notifications = []      # (method, params)
        self.closed = False
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = out.read(length or 0)
            try:
                self.inbox.put(json.loads(body))
            except ValueError:
                self.inbox.put({"_unparseable": body[:200].decode(errors="replace")})

    def send(self, msg):
        try:
            self.proc.stdin.write(frame(msg))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self.closed = True

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params, timeout):
        """The answer's message, or None (timeout or the server gone); the
        server's own requests are answered meanwhile."""
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.wait_for(rid, timeout)

    def wait_for(self, rid, timeout):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return None
            try:
                msg = self.inbox.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if msg is None:
                self.closed = True
                return None
            if "method" in msg:
                if "id" in msg:
                    self._answer(msg)
                else:
                    self.notifications.append((msg["method"], msg.get("params")))
                continue
            if msg.get("id") == rid:
                return msg

    def pump(self, seconds):
        """Handles what arrives for `seconds` (late notifications)."""
        self.wait_for(object(), seconds)

    def _answer(self, msg):
        method, params = msg["method"], msg.get("params") or {}
        self.server_requests.append((method, params))
        if method == "workspace/applyEdit":
            result = self.apply_edit(params)
            self.apply_answers.append(result)
        elif method == "workspace/configuration":
            result = [None] * len(params.get("items", []))  # null: "not set here"
        elif method == "fettle/saveDocuments":
            result = {"saved": [], "failed": [{"uri": u, "message": "this client does not save"}
                                              for u in params.get("uris", [])]}
        else:  # window/workDoneProgress/create, client/registerCapability, showMessageRequest
            result = None
        self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    def apply_edit(self, params):
        """Applies a WorkspaceEdit like an editor: versioned document edits
        must match the buffer's version; all ranges refer to the text before
        the edit."""
        edit = params.get("edit") or {}
        per_uri = []
        for change in edit.get("documentChanges") or []:
            if "kind" in change:
                return {"applied": False, "failureReason": f"resource operation {change['kind']} not supported"}
            doc = change.get("textDocument") or {}
            per_uri.append((doc.get("uri"), doc.get("version"), change.get("edits") or []))
        for uri, edits in (edit.get("changes") or {}).items():
            per_uri.append((uri, None, edits))
        for uri, version, _ in per_uri:
            if uri not in self.buffers:
                return {"applied": False, "failureReason": f"{uri} is not open"}
            if version is not None and version != self.buffers[uri][0]:
                return {"applied": False, "failureReason": f"{uri} is at version {self.buffers[uri][0]}"}
        for uri, _, edits in per_uri:
            version, text = self.buffers[uri]
            spans = sorted(((to_offset(text, e["range"]["start"], self.encoding),
                             to_offset(text, e["range"]["end"], self.encoding), e.get("newText", ""))
                            for e in edits), key=lambda s: (s[0], s[1]), reverse=True)
            for start, end, new in spans:
                text = text[:start] + new + text[end:]
            self.buffers[uri] = [version + 1, text]
            self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version + 1},
                                                   "contentChanges": [{"text": text}]})
        return {"applied": True}

    def initialize(self, timeout=60):
        uri = "file://" + self.ws
        caps = {
            "general": {"positionEncodings": ["utf-8", "utf-16"]},
            "textDocument": {"documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
                             "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {
                                 "valueSet": ["quickfix", "refactor", "refactor.rewrite"]}}}},
            "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True},
                          "configuration": True, "workspaceFolders": True},
            "window": {"workDoneProgress": True, "showMessage": {}},
        }
        msg = self.request("initialize", {
            "processId": os.getpid(), "clientInfo": {"name": "rewrite_quality.py"},
            "rootUri": uri, "workspaceFolders": [{"uri": uri, "name": "ws"}],
            "capabilities": caps, "initializationOptions": self.options}, timeout)
        if not msg or "error" in msg:
            raise RuntimeError("initialize failed: %s" % json.dumps(msg)[:500])
        self.encoding = msg["result"].get("capabilities", {}).get("positionEncoding") or "utf-16"
        self.notify("initialized", {})
        return msg["result"]

    def open(self, uri, text):
        self.buffers[uri] = [1, text]
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})

    def close(self):
        """shutdown + exit; killed if it does not go."""
        code = None
        if not self.closed and self.proc.poll() is None:
            self.request("shutdown", None, 10)
            self.notify("exit", None)
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            qb.kill_group(self.proc)
            code = "killed"
        self.stderr.close()
        return code

    def stderr_tail(self, n=3000):
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                return clip(f.read(), n, tail=True)
        except OSError:
            return None


# ------------------------------------------------------------- one item


def options(args, mock_url):
    if mock_url:
        bench = {"provider": "openai", "base_url": mock_url + "/v1", "model": "mock-coder",
                 "max_retries": 0, "timeout_ms": 30000}
    else:
        bench = {"provider": "local", "path": os.path.abspath(os.path.expanduser(args.model_path)),
                 "total_timeout_ms": int(args.timeout_s * 1000)}
        if args.context_tokens:
            bench["context_tokens"] = args.context_tokens
    return {
        "models": {"bench": bench, "local": {"auto_fetch": False}},
        "edit": {"model": "bench"},
        "completion": {"enabled": False},
    }


def run_rewrite(task, instruction, args, env, workdir):
    name = task.name
    tdir = os.path.join(workdir, f"{name}-{instruction}")
    shutil.rmtree(tdir, ignore_errors=True)
    ws = os.path.join(tdir, "ws")
    task.write(ws, correct=True)
    ws = os.path.realpath(ws)
    path = os.path.join(ws, f"{name}.py")
    with open(path, encoding="utf-8") as f:
        original = f.read()
    uri = "file://" + path
    fn = main_function(original, name)
    rng = selection(original, fn)
    rec = {"program": name, "instruction": instruction, "applied": False, "summary": None,
           "task_id": None, "seconds": None, "error": None,
           "selection": {"start_line": rng["start"]["line"], "end_line": rng["end"]["line"],
                         "function": fn.name}}
    mock = mock_url = None
    if args.mock:
        answer = mock_answer(original, fn, instruction, prose=name in args.mock_prose,
                             wrong=name in args.mock_wrong)
        mock, mock_url = start_mock(args.fettle, answer, tdir)
    server = Server(args.fettle, ws, options(args, mock_url), tdir)
    try:
        server.initialize()
        rec["position_encoding"] = server.encoding
        server.open(uri, original)
        # The preset, as the editor lists it (an invoked request).
        listed = server.request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": rng,
            "context": {"diagnostics": [], "triggerKind": 1}}, 60)
        actions = (listed or {}).get("result") or []
        title, known_text = PRESETS[instruction]
        action = next((a for a in actions if isinstance(a, dict) and a.get("title") == title), None)
        if action is None:
            raise RuntimeError("the server lists no %r on the selection (it listed %s)"
                               % (title, [a.get("title") for a in actions if isinstance(a, dict)]))
        command = action["command"]
        arg = command["arguments"][0]
        rec["instruction_text"] = arg.get("instruction")
        if arg.get("instruction") != known_text:
            rec["note"] = "the server's preset text differs from this script's copy"
        if arg.get("range") != rng or arg.get("version") != 1 or arg.get("uri") != uri:
            rec["note"] = ((rec.get("note") or "") + "; the action's arguments differ from the "
                           "selection asked for: %s" % json.dumps(arg)[:300]).lstrip("; ")
        start = time.monotonic()
        answer_msg = server.request("workspace/executeCommand",
                                    {"command": command["command"], "arguments": command["arguments"]},
                                    args.timeout_s)
        rec["seconds"] = round(time.monotonic() - start, 2)
        if answer_msg is None:
            if server.closed:
                rec["error"] = "the server exited during the rewrite"
            else:
                rec["error"] = f"no answer within {args.timeout_s:g} s (cancelled)"
                server.notify("$/cancelRequest", {"id": server.next_id - 1})
                server.pump(10)
        elif "error" in answer_msg:
            rec["error"] = "error answer: " + json.dumps(answer_msg["error"])[:1000]
        else:
            result = answer_msg.get("result") or {}
            rec["applied"] = result.get("applied") is True
            rec["summary"] = result.get("summary")
            rec["task_id"] = result.get("taskId")
        server.pump(0.2)
        stats = server.request("fettle/stats", None, 10) if not server.closed else None
        edit_stats = ((stats or {}).get("result") or {}).get("edit") or {}
        rec["refused"] = ",".join(k for k, v in sorted((edit_stats.get("refused") or {}).items()) if v) or None
        rec["model_ms"] = edit_stats.get("modelMs")
    except (RuntimeError, KeyError, IndexError, TypeError) as e:
        rec["error"] = rec["error"] or f"{type(e).__name__}: {e}"
    finally:
        rec["server_exit"] = server.close()
        if mock:
            qb.kill_group(mock)

    events = [p for m, p in server.notifications
              if m == "fettle/taskEvent" and isinstance(p, dict) and p.get("taskId") == rec["task_id"]]
    rec["model_text"] = clip("".join(e.get("text") or "" for e in events if e.get("kind") == "text"), 6000)
    rec["apply_edits"] = len(server.apply_answers)
    if any(a.get("applied") is not True for a in server.apply_answers):
        rec["note"] = ((rec.get("note") or "") + "; this client refused an applyEdit: "
                       + json.dumps(server.apply_answers)[:300]).lstrip("; ")
    rec["shown_messages"] = [clip(p.get("message"), 300) for m, p in server.notifications
                             if m == "window/showMessage" and isinstance(p, dict)] or None
    if args.mock:
        rec["model_calls"] = model_calls(tdir)
    result_text = server.buffers.get(uri, [None, original])[1]
    rec["buffer_changed"] = result_text != original
    if rec["applied"] and not rec["buffer_changed"]:
        rec["note"] = ((rec.get("note") or "") + "; applied, but the buffer did not change").lstrip("; ")
    if not rec["applied"] and rec["buffer_changed"]:
        rec["note"] = ((rec.get("note") or "") + "; not applied, but the buffer changed").lstrip("; ")
    if not rec["applied"] or rec["error"]:
        rec["stderr_tail"] = server.stderr_tail()

    if rec["applied"]:
        evaluate(rec, task, instruction, original, result_text, ws, env, args)
    if args.keep:
        dest = os.path.join(os.path.expanduser(args.keep), f"{name}-{instruction}")
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(tdir, dest, symlinks=True)
    shutil.rmtree(tdir, ignore_errors=True)
    return rec


def evaluate(rec, task, instruction, original, text, ws, env, args):
    rec["diff"] = clip("".join(difflib.unified_diff(
        original.splitlines(True), text.splitlines(True), f"a/{task.name}.py", f"b/{task.name}.py")), 8000)
    rec["lines"] = [len(original.splitlines()), len(text.splitlines())]
    try:
        tree = ast.parse(text)
        rec["parses"] = True
    except SyntaxError as e:
        rec["parses"] = False
        rec["syntax_error"] = f"line {e.lineno}: {e.msg}"
        return
    if instruction == "doc":
        rec["code_unchanged"] = code_dump(text, docstrings=False) == code_dump(original, docstrings=False)
        fns = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == task.name]
        rec["documented"] = bool(fns and ast.get_docstring(fns[0]))
    else:
        rec["code_changed"] = code_dump(text) != code_dump(original)
    with open(os.path.join(ws, f"{task.name}.py"), "w", encoding="utf-8") as f:
        f.write(text)
    rc, secs, out = qb.run_tests(ws, task, env, args.test_timeout_s)
    rec["tests_pass"] = rc == 0
    rec["tests_seconds"] = round(secs, 1)
    if rc != 0:
        rec["tests_output"] = out if rc is not None else f"killed after {args.test_timeout_s:g} s"


def original_tests(task, env, workdir, args):
    ws = os.path.join(workdir, f"{task.name}-original")
    task.write(ws, correct=True)
    rc, secs, out = qb.run_tests(ws, task, env, args.test_timeout_s)
    shutil.rmtree(ws, ignore_errors=True)
    return rc == 0, secs, out


# ------------------------------------------------------------- reporting


def yn(v):
    return "–" if v is None else ("yes" if v else "no")


def verdict(r):
    if r["error"]:
        return "error"
    if not r["applied"]:
        return "refused" + (f" ({r['refused']})" if r.get("refused") else "")
    if not r.get("parses"):
        return "does not parse"
    if r["instruction"] == "doc":
        ok = r.get("code_unchanged")
        return ("code unchanged" if ok else "CODE CHANGED") + ("" if r.get("documented") else ", no docstring")
    if r.get("tests_pass"):
        return "tests pass" + ("" if r.get("code_changed") else " (code as before)")
    return "TESTS FAIL"


def markdown(records):
    rows = ["| program | instruction | applied | parses | verdict | seconds | summary |",
            "|---|---|---|---|---|---:|---|"]
    for r in records:
        summary = (r["summary"] or r["error"] or "").replace("|", "\\|").replace("\n", " ")
        secs = "–" if r["seconds"] is None else (
            f"{r['seconds']:.2f}" if r["seconds"] < 10 else f"{r['seconds']:.1f}")
        rows.append(f"| {r['program']} | {LABEL[r['instruction']]} | {yn(r['applied'])} | "
                    f"{yn(r.get('parses'))} | {verdict(r)} | {secs} | {clip(summary, 90)} |")
    return "\n".join(rows)


def summarize(records):
    out = {}
    for ins in ("doc", "simplify"):
        rs = [r for r in records if r["instruction"] == ins]
        if not rs:
            continue
        n = len(rs)
        applied = sum(1 for r in rs if r["applied"])
        secs = [r["seconds"] for r in rs if r["seconds"] is not None]
        med = statistics.median(secs) if secs else None
        s = {"rewrites": n, "applied": applied,
             "parses": sum(1 for r in rs if r.get("parses")),
             "median_seconds": None if med is None else round(med, 2),
             "errors": sum(1 for r in rs if r["error"])}
        line = f"{LABEL[ins]}: applied {applied}/{n}"
        if ins == "doc":
            s["code_unchanged"] = sum(1 for r in rs if r.get("code_unchanged"))
            s["documented"] = sum(1 for r in rs if r.get("code_unchanged") and r.get("documented"))
            line += f", code unchanged {s['code_unchanged']}/{n} (with a docstring {s['documented']}/{n})"
        else:
            s["tests_pass"] = sum(1 for r in rs if r.get("tests_pass"))
            s["tests_pass_changed"] = sum(1 for r in rs if r.get("tests_pass") and r.get("code_changed"))
            line += f", tests pass {s['tests_pass']}/{n} (code changed {s['tests_pass_changed']}/{n})"
        line += ", median " + ("–" if med is None else f"{med:.2f} s" if med < 10 else f"{med:.1f} s")
        if s["errors"]:
            line += f", {s['errors']} error(s)"
        s["line"] = line
        out[ins] = s
    return out


# ------------------------------------------------------------------ main


def names_arg(text):
    return {n.strip() for n in (text or "").split(",") if n.strip()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quixbugs", required=True, metavar="DIR",
                    help="a QuixBugs checkout, or its git directory (read with git show)")
    ap.add_argument("--fettle", default=DEFAULT_FETTLE, metavar="PATH")
    model = ap.add_mutually_exclusive_group(required=True)
    model.add_argument("--model-path", metavar="GGUF", help='a local GGUF ([models.bench] provider = "local")')
    model.add_argument("--mock", action="store_true", help="a scripted mock model (plumbing only)")
    ap.add_argument("--context-tokens", type=int, metavar="N", help="with --model-path: models.bench.context_tokens")
    ap.add_argument("--instruction", choices=["doc", "simplify", "both"], default="both")
    ap.add_argument("--only", metavar="a,b,c", help="these programs only (of the 20)")
    ap.add_argument("--limit", type=int, metavar="N", help="the first N programs only")
    ap.add_argument("--out", metavar="FILE", help="results JSON, rewritten after every rewrite")
    ap.add_argument("--markdown", action="store_true", help="print a table of the rewrites")
    ap.add_argument("--timeout-s", type=float, default=300, help="limit on one fettle.rewrite (default 300)")
    ap.add_argument("--test-timeout-s", type=float, default=120, help="limit on one test run (default 120)")
    ap.add_argument("--python", metavar="PY", help="the python3 (with pytest) that runs the tests")
    ap.add_argument("--keep", metavar="DIR", help="keep each rewrite's workspace, server log and mock record here")
    ap.add_argument("--mock-prose", default="gcd", metavar="a,b",
                    help="--mock: these programs' answers are prose without code (default gcd)")
    ap.add_argument("--mock-wrong", default="bitcount", metavar="a,b",
                    help="--mock: these programs' answers change the code (default bitcount)")
    args = ap.parse_args()
    args.mock_prose = names_arg(args.mock_prose)
    args.mock_wrong = names_arg(args.mock_wrong)

    repo = qb.QuixBugs(args.quixbugs)
    commit = repo.commit or "unknown (a checkout without git)"
    log(f"QuixBugs {repo.path} at {commit}{' (with local changes)' if repo.dirty else ''}")
    if repo.commit != qb.PINNED_COMMIT:
        log(f"warning: the benchmark is pinned to QuixBugs {qb.PINNED_COMMIT}; this is {commit}")
    names = program_names(repo)
    if len(names) != PROGRAMS:
        log(f"warning: {len(names)} programs with JSON cases ({PROGRAMS} expected)")
    if args.only:
        wanted = names_arg(args.only)
        unknown = wanted - set(names)
        if unknown:
            raise SystemExit(f"--only: not among the {len(names)} programs: {', '.join(sorted(unknown))}")
        names = [n for n in names if n in wanted]
    if args.limit is not None:
        names = names[:args.limit]
    instructions = ["doc", "simplify"] if args.instruction == "both" else [args.instruction]

    qb.check_fettle_and_model(args)
    python3, bindir, pytest_version = qb.find_python(args.python)
    env = qb.test_env(bindir)
    version = subprocess.run([args.fettle, "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT).stdout.decode().strip()
    model_desc = ("mock (benches/rewrite_quality.py's answers; prose: %s; wrong: %s)"
                  % (",".join(sorted(args.mock_prose)) or "-", ",".join(sorted(args.mock_wrong)) or "-")
                  if args.mock else "local " + os.path.abspath(os.path.expanduser(args.model_path)))
    report = {
        "benchmark": "rewrite-quality-quixbugs",
        "quixbugs_commit": repo.commit,
        "fettle": args.fettle,
        "fettle_version": version,
        "model": model_desc,
        "initialization_options": options(args, "http://127.0.0.1:PORT" if args.mock else None),
        "instructions": instructions,
        "programs": names,
        "timeout_s": args.timeout_s,
        "test_command": "python3 -m pytest -q test_NAME.py",
        "python": f"{python3} ({pytest_version})",
        "cpus": os.cpu_count(),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "original_tests": {},
        "rewrites": [],
    }
    log(f"{len(names)} program(s) x {len(instructions)} instruction(s), model: {model_desc}; "
        f"tests with {python3} ({pytest_version})")
    workdir = tempfile.mkdtemp(prefix="fettle-rewrite-quality-")
    try:
        tasks = []
        for n in names:
            t = qb.Task(repo, n)
            if t.error or t.correct is None:
                raise SystemExit(f"{n}: cannot build its workspace: {t.error or 'no correct program'}")
            ok, secs, out = original_tests(t, env, workdir, args)
            report["original_tests"][n] = {"pass": ok, "seconds": round(secs, 1),
                                           **({} if ok else {"output": out})}
            if not ok:
                log(f"warning: {n}: the original fails its own tests: {clip(out, 500, tail=True)}")
            tasks.append(t)
        total = len(tasks) * len(instructions)
        i = 0
        for t in tasks:
            for ins in instructions:
                i += 1
                rec = run_rewrite(t, ins, args, env, workdir)
                rec["original_tests_pass"] = report["original_tests"][t.name]["pass"]
                report["rewrites"].append(rec)
                report["summary"] = summarize(report["rewrites"])
                if args.out:
                    qb.write_json(args.out, report)
                secs = "–" if rec["seconds"] is None else f"{rec['seconds']:.1f} s"
                log(f"[{i}/{total}] {t.name} {LABEL[ins]}: {verdict(rec)}, {secs}: "
                    f"{clip(rec['summary'] or rec['error'] or '', 160)}")
        report["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if args.out:
            qb.write_json(args.out, report)
        if args.markdown:
            print(markdown(report["rewrites"]))
            print()
        for s in summarize(report["rewrites"]).values():
            print(s["line"])
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
