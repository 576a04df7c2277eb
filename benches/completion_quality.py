#!/usr/bin/env python3
"""Ghost-text quality on real code nobody here wrote (issue 40).

Usage: python3 benches/completion_quality.py FETTLE_BINARY
           [--model NAME=PATH.gguf ...] [--lang python|rust] [--positions N]
           [--seed S] [--json OUT] [--trigger automatic|invoked] [--rest-s S]
           [--set SECTION.KEY=JSON ...] [--log-dir DIR]

Positions are picked by a seeded random from Python's standard library
(`--lang python`) or from the crates under ~/.cargo/registry/src
(`--lang rust`: tokio, serde_json, regex, …): a non-blank, non-comment line
inside a file of 2-60 KB, the cursor either after the line's indentation
("start") or at a word boundary inside it ("mid"). The document the server
sees is the file with the rest of that line removed (the rest of the file
stays as the suffix); the expected answer is what was removed.

Each model runs in its own real server over stdio (`completion.model` set
to it through initializationOptions), through the same prompt building.
For each position: a `textDocument/inlineCompletion` at a new position
(the first completion there; automatic as ghost text is, or `--trigger
invoked` as the first runs were), then one character of the expected
text typed and asked again (typing). Reported per model: exact match of
the completed line, edit similarity (difflib ratio, 0-100) of the
completed line to the real one and of the suggestion alone to the rest of
the real line, empty answers, and latency p50/p90.

`--rest-s S` (default 0: the request right after the file opens, nothing
prepared) does what the editor plugins do when the cursor comes to rest
before the user types: a `fettle/cursor` report at the position, then S
seconds of rest, then the request. The first-completion latency is the
request's alone, as a user who pauses S seconds before typing sees it.

`--set completion.max_prompt_tokens=2048` (repeatable; the value is JSON,
or a plain string) passes one more setting to every model's server, to
compare a setting's effect on the same positions; `--log-dir DIR` keeps
each server's log (`FETTLE_LOG`, default `warn`) as DIR/NAME.log.
"""
import argparse
import difflib
import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time


def frame(msg):
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Server:
    def __init__(self, binary, options, root):
        env = dict(os.environ, FETTLE_LOG=os.environ.get("FETTLE_LOG", "warn"),
                   XDG_CONFIG_HOME=os.path.join(root, "config"))
        self.proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(root, "stderr.log"), "ab"),
                                     env=env, cwd=root)
        self.answers, self.next_id, self.lock = {}, 1, threading.Lock()
        threading.Thread(target=self.reader, daemon=True).start()
        self.request("initialize", {"processId": None, "rootUri": "file://" + root,
                                    "initializationOptions": options, "capabilities": {}}, 60)
        self.notify("initialized", {})

    def reader(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(out.read(length))
            if "method" in msg and "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                with self.lock:
                    self.answers[msg["id"]] = msg

    def send(self, msg):
        self.proc.stdin.write(frame(msg))
        self.proc.stdin.flush()

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params, wait=120):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with self.lock:
                if rid in self.answers:
                    return self.answers.pop(rid)
            time.sleep(0.002)
        return None

    def close(self):
        try:
            self.request("shutdown", None, 10)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def sources(lang):
    if lang == "python":
        root = sysconfig.get_paths()["stdlib"]
        files = [f for f in glob.glob(os.path.join(root, "*.py"))
                 + glob.glob(os.path.join(root, "*", "*.py"))
                 if "test" not in f and "idlelib" not in f]
    else:
        crates = ("tokio-1", "serde_json-1", "regex-1", "regex-syntax", "anyhow-1", "clap_builder")
        files = [f for f in glob.glob(os.path.expanduser("~/.cargo/registry/src/*/*/src/**/*.rs"),
                                      recursive=True)
                 if any("/" + c in f for c in crates) and "/tests/" not in f]
    return sorted(f for f in files if 2_000 <= os.path.getsize(f) <= 60_000)


def positions(lang, count, seed):
    rng = random.Random(seed)
    files = sources(lang)
    comment = "#" if lang == "python" else "//"
    out = []
    while len(out) < count:
        path = rng.choice(files)
        try:
            lines = open(path, encoding="utf-8").read().split("\n")
        except (UnicodeDecodeError, OSError):
            continue
        candidates = [i for i, l in enumerate(lines[5:-2], 5)
                      if len(l.strip()) >= 6 and not l.strip().startswith((comment, '"""', "*", "'''"))]
        if not candidates:
            continue
        line_no = rng.choice(candidates)
        line = lines[line_no]
        indent = len(line) - len(line.lstrip())
        if rng.random() < 0.5:
            kind, col = "start", indent
        else:
            cuts = [i for i in range(indent + 2, len(line) - 2)
                    if not line[i - 1].isalnum() and line[i - 1] != "_" and line[i] != " "]
            if not cuts:
                continue
            kind, col = "mid", rng.choice(cuts)
        out.append({"path": path, "line": line_no, "col": col, "kind": kind,
                    "expected": line[col:], "full": line,
                    "text": "\n".join(lines[:line_no] + [line[:col]] + lines[line_no + 1:])})
    return out


def first_line(answer, line_prefix, col):
    """The cursor line once the answer's first item is accepted, or None."""
    result = (answer or {}).get("result")
    items = result.get("items") if isinstance(result, dict) else result
    if not items:
        return None
    item = items[0]
    text = item.get("insertText")
    if isinstance(text, dict):
        text = text.get("value", "")
    start = col
    rng = item.get("range")
    if rng:
        start = rng["start"]["character"]  # UTF-16; the sampled lines are mostly ASCII
    text = (text or "").split("\n")[0]
    if not text.strip():
        return None
    return line_prefix[:start] + text


def with_setting(options, setting):
    """`options` with SECTION.KEY=VALUE set (VALUE is JSON, or a plain string)."""
    key, _, value = setting.partition("=")
    try:
        value = json.loads(value)
    except ValueError:
        pass
    node = options
    *sections, last = key.split(".")
    for section in sections:
        node = node.setdefault(section, {})
    node[last] = value
    return options


def run_model(binary, name, path, cases, root, rest_s=0.0, trigger=2, settings=()):
    options = {}
    if path:
        options = {"models": {"m": {"provider": "local", "path": path}}, "completion": {"model": "m"}}
    for setting in settings:
        options = with_setting(options, setting)
    options = options or None
    server = Server(binary, options, root)
    rows = []
    for n, case in enumerate(cases):
        uri = "file://%s/case%d%s" % (root, n, ".py" if case["path"].endswith(".py") else ".rs")
        lang = "python" if uri.endswith(".py") else "rust"
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": lang, "version": 1, "text": case["text"]}})
        pos = {"line": case["line"], "character": case["col"]}
        if rest_s > 0:
            server.notify("fettle/cursor", {"textDocument": {"uri": uri}, "position": pos})
            time.sleep(rest_s)
        began = time.monotonic()
        answer = server.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": pos, "context": {"triggerKind": trigger}})
        first_s = time.monotonic() - began
        prefix = case["full"][:case["col"]]
        got = first_line(answer, prefix, case["col"])
        # Typing: the expected text's first character, then asked again.
        typed = case["expected"][:1]
        server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                      "contentChanges": [{"range": {"start": pos, "end": pos}, "text": typed}]})
        began = time.monotonic()
        server.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri},
            "position": {"line": case["line"], "character": case["col"] + len(typed)},
            "context": {"triggerKind": 2}})
        typing_s = time.monotonic() - began
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        real = case["full"].rstrip()
        rows.append({"kind": case["kind"], "got": got, "real": real,
                     "exact": got is not None and got.rstrip() == real,
                     "similarity": 100 * difflib.SequenceMatcher(None, (got or prefix).rstrip(), real).ratio(),
                     # The suggestion alone against what the line really holds
                     # after the cursor (the typed prefix does not count).
                     "suggestion_similarity": 100 * difflib.SequenceMatcher(
                         None, (got or prefix)[len(prefix):].rstrip(), case["expected"].rstrip()).ratio(),
                     "empty": got is None, "first_s": first_s, "typing_s": typing_s})
        print("  %s %-5s %5.2fs %s" % (name, case["kind"], first_s,
                                       "EXACT" if rows[-1]["exact"] else repr((got or "")[:70])),
              flush=True)
    server.close()
    return rows


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("binary")
    p.add_argument("--model", action="append", default=[],
                   help="NAME=PATH.gguf (repeatable); default: the built-in model only")
    p.add_argument("--lang", choices=["python", "rust"], default="python")
    p.add_argument("--positions", type=int, default=30)
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--json", help="write every position's result here (after each model)")
    p.add_argument("--trigger", choices=["automatic", "invoked"], default="automatic",
                   help="the first request's trigger: automatic (ghost text as the user "
                        "types; debounced) or invoked (asked for; alternatives sampled)")
    p.add_argument("--rest-s", type=float, default=0.0,
                   help="report the cursor and rest this long before the first request")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=JSON",
                   help="one more setting for every model's server (repeatable)")
    p.add_argument("--log-dir", help="keep each server's log here as NAME.log")
    a = p.parse_args()
    models = [m.split("=", 1) for m in a.model] or [["default", None]]
    cases = positions(a.lang, a.positions, a.seed)
    results = {}
    for name, path in models:
        with tempfile.TemporaryDirectory(prefix="fettle-quality-") as root:
            results[name] = run_model(a.binary, name, path, cases, root, a.rest_s,
                                      1 if a.trigger == "invoked" else 2, a.set)
            if a.log_dir:
                os.makedirs(a.log_dir, exist_ok=True)
                shutil.copyfile(os.path.join(root, "stderr.log"),
                                os.path.join(a.log_dir, name + ".log"))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"lang": a.lang, "seed": a.seed, "rest_s": a.rest_s, "settings": a.set,
                           "cases": [{k: c[k] for k in ("path", "line", "col", "kind", "full")}
                                     for c in cases],
                           "results": results}, f, indent=1)
    print("\n| model (%s, %d positions, seed %d) | exact | edit similarity: line / suggestion | empty | first p50 / p90 | typing p50 / p90 |"
          % (a.lang, len(cases), a.seed))
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        first = [r["first_s"] for r in rows]
        typing = [r["typing_s"] for r in rows]
        print("| %s | %d/%d | %.1f / %.1f | %d | %.2f / %.2f s | %.2f / %.2f s |" % (
            name, sum(r["exact"] for r in rows), len(rows),
            statistics.mean(r["similarity"] for r in rows),
            statistics.mean(r["suggestion_similarity"] for r in rows), sum(r["empty"] for r in rows),
            pct(first, 0.5), pct(first, 0.9), pct(typing, 0.5), pct(typing, 0.9)))
    print("\n| model | kind | exact | similarity (line) | empty | first p50 / p90 |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        for kind in ("start", "mid"):
            part = [r for r in rows if r["kind"] == kind]
            if part:
                first = [r["first_s"] for r in part]
                print("| %s | %s | %d/%d | %.1f | %d | %.2f / %.2f s |" % (
                    name, kind, sum(r["exact"] for r in part), len(part),
                    statistics.mean(r["similarity"] for r in part),
                    sum(r["empty"] for r in part), pct(first, 0.5), pct(first, 0.9)))


if __name__ == "__main__":
    main()
