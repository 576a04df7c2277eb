#!/usr/bin/env python3
"""A hostile LSP client soak (issue 39): batches of random, malformed and
wrong-typed messages over real stdio framing; after each batch, every
request must be answered exactly once within the window (1 s), and the
server's RSS (read from /proc between batches) must stay bounded.

Usage: python3 benches/lsp_soak.py FETTLE_BINARY [--minutes M] [--batch N]
           [--seed S] [--window SECONDS] [--huge-mb MB] [--no-devices]

Sends wrong-typed params to every method Fettle registers (standard LSP
and its own: `fettle/stats`, `fettle/cursor`, `textDocument/inlineCompletion`,
`workspace/executeCommand` with every command), unknown methods, malformed
JSON, huge strings, deep nesting, and `file:` URIs of devices, a FIFO, a
socket and a huge file (for `documentSymbol` of files that are not open).
Prints one line per batch and a summary (JSON on the last line); exits 1
when a request was lost, late or answered twice, the server died, or the
RSS went past --max-rss-mb.
"""
import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

METHODS_REQ = [
    "textDocument/documentSymbol", "workspace/symbol", "textDocument/codeAction",
    "textDocument/completion", "workspace/executeCommand", "textDocument/inlineCompletion",
    "fettle/stats", "initialize",
]
METHODS_NOTE = [
    "textDocument/didOpen", "textDocument/didChange", "textDocument/didSave",
    "textDocument/didClose", "workspace/didChangeConfiguration",
    "workspace/didChangeWatchedFiles", "workspace/didChangeWorkspaceFolders",
    "fettle/cursor", "window/workDoneProgress/cancel", "$/cancelRequest", "$/setTrace",
    "initialized",
]
UNKNOWN = ["textDocument/hover", "textDocument/definition", "fettle/nope", "$/weird", "x" * 300, ""]
COMMANDS = ["fettle.acceptCompletion", "fettle.rewrite", "fettle.chat", "fettle.fixDiagnostics",
            "fettle.cancel", "fettle.undo", "fettle.unknown"]
TASK_COMMANDS = ["fettle.chat", "fettle.fixDiagnostics"]


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def deep(n):
    v = 1
    for _ in range(n):
        v = [v]
    return v


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.root = tempfile.mkdtemp(prefix="fettle-soak-")
        self.make_workspace()
        env = dict(os.environ, FETTLE_LOG=os.environ.get("FETTLE_LOG", "warn"),
                   XDG_CONFIG_HOME=os.path.join(self.root, "config"),
                   XDG_CACHE_HOME=os.path.join(self.root, "cache"),
                   XDG_DATA_HOME=os.path.join(self.root, "data"))
        self.stderr = open(os.path.join(self.root, "stderr.log"), "wb")
        self.model_options = self.start_mock_model() if args.model == "mock" else None
        self.proc = subprocess.Popen([args.binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env, cwd=self.ws)
        self.lock = threading.Lock()
        self.answers = {}        # id key -> count
        self.answered_at = {}    # id key -> monotonic time of the first answer
        self.answer_text = {}    # id key -> the start of the first answer
        self.sent_at = {}        # id key -> when the request was written
        self.null_errors = 0     # answers with id null (unparseable messages)
        self.stats_answers = {}  # id key -> result of this client's own fettle/stats
        self.closed = False
        self.next_id = 1
        self.messages = 0
        self.requests = {}       # id key -> (method, params summary)
        threading.Thread(target=self.reader, daemon=True).start()

    def start_mock_model(self):
        """A scripted model on 127.0.0.1 (`fettle mock-model`) for every
        feature, as in the attack campaign: what is measured is the server,
        not the embedded model's fixed cost (its weights and KV cache,
        ~190 MB resident once loaded) nor its seconds per answer."""
        script = os.path.join(self.root, "mock-script.json")
        with open(script, "w") as f:
            json.dump({"responses": [{"text": "x + 1", "repeat": True}]}, f)
        self.mock = subprocess.Popen([self.args.binary, "mock-model", "--script", script],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first = self.mock.stdout.readline().split()  # "listening on http://127.0.0.1:PORT"
        url = next((word for word in first if word.startswith("http://")), None)
        if not url:
            sys.exit("fettle mock-model did not print its address: %r" % first)
        model = {"provider": "openai", "base_url": url.rstrip("/") + "/v1", "model": "mock-coder",
                 "max_retries": 0}
        return {"models": {"mock": model}, "completion": {"model": "mock"},
                "edit": {"model": "mock"}, "agent": {"model": "mock"}}

    def make_workspace(self):
        self.ws = os.path.join(self.root, "ws")
        os.makedirs(os.path.join(self.ws, "src"))
        with open(os.path.join(self.ws, "src", "small.py"), "w") as f:
            f.write("class A:\n    def m(self):\n        return 1\n\ndef f(x):\n    return x\n")
        huge = os.path.join(self.ws, "huge.py")
        with open(huge, "w") as f:
            line = "def f%d(x):\n    return x + 1\n"
            n = int(self.args.huge_mb * 1_000_000 / 30)
            f.write("".join(line % i for i in range(n)))
        self.uris = {
            "small": "file://" + os.path.join(self.ws, "src", "small.py"),
            "huge_disk": "file://" + huge,
            "missing": "file://" + os.path.join(self.ws, "missing.py"),
        }
        if not self.args.no_devices:
            fifo = os.path.join(self.ws, "fifo.py")
            os.mkfifo(fifo)
            zero = os.path.join(self.ws, "zero.py")
            os.symlink("/dev/zero", zero)
            sock = os.path.join(self.ws, "sock.py")
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.bind(sock)
            self.uris.update({
                "fifo": "file://" + fifo, "zero_link": "file://" + zero, "socket": "file://" + sock,
                "dev_zero": "file:///dev/zero", "dev_stdin": "file:///dev/stdin",
                "dev_urandom": "file:///dev/urandom", "proc": "file:///proc/self/mem",
            })

    # --- the wire ---------------------------------------------------------
    def write(self, body: bytes):
        try:
            self.proc.stdin.write(frame(body))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.closed = True
        self.messages += 1

    def reader(self):
        out = self.proc.stdout
        while True:
            length = None
            arrived = None
            while True:
                line = out.readline()
                if not line:
                    self.closed = True
                    return
                # When the answer's first bytes came: this client's own time
                # to read and parse big answers (2.5 MB outlines) is not the
                # server's.
                arrived = arrived or time.monotonic()
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = out.read(length or 0)
            try:
                msg = json.loads(body)
            except ValueError:
                continue
            if "method" in msg:
                if "id" in msg:  # a server request: answer like a quiet client
                    method = msg["method"]
                    result = None
                    if method == "workspace/configuration":
                        result = [None] * len(msg.get("params", {}).get("items", []))
                    reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
                    with self.lock:
                        try:
                            self.proc.stdin.write(frame(json.dumps(reply).encode()))
                            self.proc.stdin.flush()
                        except (BrokenPipeError, OSError, ValueError):
                            pass
                continue
            key = json.dumps(msg.get("id"))
            with self.lock:
                if msg.get("id") is None:
                    self.null_errors += 1
                    continue
                self.answers[key] = self.answers.get(key, 0) + 1
                self.answered_at.setdefault(key, arrived)
                self.answer_text.setdefault(key, json.dumps(msg.get("error") or msg.get("result"))[:200])
                if key.startswith('"stats-'):
                    self.stats_answers[key] = msg.get("result")

    def request(self, method, params, omit_params=False, note=None):
        rid = self.next_id if self.rng.random() < 0.7 else "s-%d" % self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if not omit_params:
            msg["params"] = params
        key = json.dumps(rid)
        self.requests[key] = (method, (note + ": " if note else "") + json.dumps(params)[:160])
        with self.lock:
            self.write(json.dumps(msg).encode())
            self.sent_at[key] = time.monotonic()
        return key

    def notify(self, method, params):
        with self.lock:
            self.write(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode())

    def raw(self, body: bytes):
        with self.lock:
            self.write(body)

    # --- hostile values ---------------------------------------------------
    def uri(self):
        return self.rng.choice(list(self.uris.values()) + ["file:///", "not a uri", "file://" + "a/" * 2000,
                                                          "untitled:x", "file:///etc/passwd"])

    def junk(self, depth=0):
        r = self.rng.random()
        choices = [
            None, True, -1, 2**63, 1.5e308, "", "x" * self.rng.choice([1, 100, 100_000]),
            [], {}, [1, "a", None], {"uri": 5}, {"textDocument": 7},
            {"textDocument": {"uri": self.uri()}},
            {"textDocument": {"uri": self.uri()}, "position": {"line": -1, "character": "x"}},
            {"textDocument": {"uri": self.uri()}, "range": {"start": 5, "end": None}},
            deep(self.rng.choice([10, 100])),
        ]
        if r < 0.1 and depth < 2:
            return {str(i): self.junk(depth + 1) for i in range(self.rng.randint(1, 4))}
        return self.rng.choice(choices)

    def wrong_params(self, method):
        uri = self.uri()
        pos = {"line": self.rng.choice([0, 1, 10**9, -5]), "character": self.rng.choice([0, 3, 10**9])}
        shaped = {
            "textDocument/documentSymbol": [{"textDocument": {"uri": uri}},
                                            {"textDocument": {"uri": self.uris["huge_disk"]}}],
            "workspace/symbol": [{"query": self.rng.choice(["", "f", "x" * 1_000_000, "\u0000" * 1000,
                                                          "é" * 50_000])}, {"query": 5}],
            "textDocument/codeAction": [{"textDocument": {"uri": uri},
                                         "range": {"start": pos, "end": pos},
                                         "context": {"diagnostics": self.junk()}}],
            "textDocument/completion": [{"textDocument": {"uri": uri}, "position": pos}],
            "textDocument/inlineCompletion": [{"textDocument": {"uri": uri}, "position": pos,
                                               "context": {"triggerKind": self.rng.choice([1, 2, "x"])}}],
            "workspace/executeCommand": [self.command(uri)],
            "fettle/stats": [[1], "x", 3],
            "initialize": [{"processId": None, "capabilities": {}}],
        }.get(method, [])
        if shaped and self.rng.random() < 0.6:
            return self.rng.choice(shaped)
        return self.junk()

    def command(self, uri):
        command = self.rng.choice(self.args.commands.split(",") if self.args.commands else COMMANDS)
        if command in TASK_COMMANDS:
            # Wrong types only: with no argument (or an empty one) these
            # start a real agent task, answered when it ends.
            wrong = [["x"], [5], [[1, 2]], "str", 7, [{"uri": 5}], [{"message": 5}],
                     [{"uri": "not a uri"}]]
            if self.args.agent_unknown_fields:
                # Objects with unknown fields: today fettle.fixDiagnostics
                # ignores them and starts a task (area C's argument parsing).
                wrong += [[{"textDocument": 7}], [{"uri": uri, "range": 3}],
                          [{"message": ["x"], "uri": uri}]]
            return {"command": command, "arguments": self.rng.choice(wrong)}
        return {"command": command, "arguments": self.rng.choice(
            [None, [], [self.junk()], self.junk(), [{"uri": uri, "range": 3}]])}

    # --- a batch ----------------------------------------------------------
    def batch(self, n):
        keys = []
        for _ in range(n):
            r = self.rng.random()
            if self.args.only:  # one kind of message only (to find what costs)
                r = {"req": 0.0, "unknown": 0.5, "note": 0.6, "valid": 0.8, "malformed": 0.9,
                     "huge": 0.999}[self.rng.choice(self.args.only.split(","))]
            if r < 0.45:
                method = self.rng.choice(self.args.methods.split(",") if self.args.methods else METHODS_REQ)
                keys.append(self.request(method, self.wrong_params(method),
                                         omit_params=self.rng.random() < 0.05))
            elif r < 0.55:
                keys.append(self.request(self.rng.choice(UNKNOWN), self.junk()))
            elif r < 0.75:
                self.notify(self.rng.choice(METHODS_NOTE), self.junk())
            elif r < 0.85:
                self.valid_traffic(keys)
            elif r < 0.995:
                self.malformed()
            else:  # one batch in two or so: ~20 MB of JSON each is the client's cost too
                self.huge_open(keys)
        return keys

    def valid_traffic(self, keys):
        small = self.uris["small"]
        text = "def g%d():\n    return %d\n" % (self.next_id, self.next_id)
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": small, "languageId": "python", "version": 1, "text": text}})
        self.notify("textDocument/didChange", {"textDocument": {"uri": small, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": self.rng.randint(0, 3), "character": self.rng.randint(0, 9)},
                       "end": {"line": self.rng.randint(0, 3), "character": self.rng.randint(0, 9)}},
             "text": self.rng.choice(["x", "\n", "", "😀", "class Z:\n"])}]})
        keys.append(self.request("textDocument/documentSymbol", {"textDocument": {"uri": small}}))

    def malformed(self):
        r = self.rng.random()
        if r < 0.3:
            self.raw(b'{"jsonrpc": "2.0", "id": 1, "method": ')
        elif r < 0.5:
            self.raw(json.dumps([1, 2, 3]).encode())
        elif r < 0.6:
            self.raw(b"\xff\xfe not utf-8 \x00")
        elif r < 0.7:
            n = 100_000  # far past any parser's recursion limit
            self.raw(b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": '
                     + b"[" * n + b"]" * n + b"}")
        elif r < 0.8:
            self.raw(json.dumps({"jsonrpc": "2.0", "id": {"obj": 1}, "method": "fettle/stats"}).encode())
        else:
            self.raw(json.dumps({"jsonrpc": "1.0", "id": None, "method": 5}).encode())

    def huge_open(self, keys):
        # A huge buffer (grown and shrunk by edits), and its outline.
        uri = "file://" + os.path.join(self.ws, "open_huge_%d.py" % self.rng.randint(0, 2))
        mb = self.rng.choice(self.args.open_mb or [0.5, 2, self.args.huge_mb])
        text = "def h(x):\n    return x\n" * int(mb * 1_000_000 / 24)
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        keys.append(self.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}},
                                 note="opened, %s MB" % mb))
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
             "text": "class Grown:\n" * self.rng.choice([1, 1000])}]})
        keys.append(self.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}},
                                 note="edited, %s MB" % mb))
        if self.rng.random() < 0.5:
            self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    # --- measuring --------------------------------------------------------
    def rss_kb(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
        except (OSError, KeyError, ValueError):
            return None, None

    def run(self):
        a = self.args
        init = self.request("initialize", {"processId": None, "rootUri": "file://" + self.ws,
                                           "initializationOptions": self.model_options,
                                           "capabilities": {"textDocument": {"documentSymbol": {
                                               "hierarchicalDocumentSymbolSupport": True}}}})
        self.wait_for([init], 30)
        self.notify("initialized", {})
        time.sleep(0.5)
        end = time.monotonic() + a.minutes * 60
        late, lost, doubles, rss_seen, heap_seen, batches = [], 0, 0, [], [], 0
        while time.monotonic() < end and not self.closed:
            keys = self.batch(a.batch)
            sent = time.monotonic()
            self.wait_for(keys, a.window)
            # Memory right after the window, before any further wait.
            rss, hwm = self.rss_kb()
            if rss:
                rss_seen.append(rss)
            heap = self.heap_mb()
            if heap:
                heap_seen.append(heap)
            with self.lock:
                missing = [k for k in keys if k not in self.answers]
            if missing:
                self.wait_for(missing, 30)  # late, not lost (yet)
            # Late: not answered, or its first bytes came after the window
            # (an answer that came in time may still have been being read).
            with self.lock:
                late.extend((k, *self.requests[k]) for k in keys if k not in self.answered_at
                            or self.answered_at[k] - sent > a.window)
            batches += 1
            print("batch %d: %d messages, %d requests, %d late, RSS %s MB, HWM %s MB, heap %s" % (
                batches, self.messages, len(self.requests), len(late),
                rss and rss // 1024, hwm and hwm // 1024, heap), flush=True)
        # The end: shutdown, and a last look for doubles and losses.
        shut = self.request("shutdown", None)
        self.wait_for([shut], 30)
        self.notify("exit", None)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = "killed (no exit)"
        if self.model_options:
            self.mock.kill()
        time.sleep(0.2)
        with self.lock:
            lost = [k for k in self.requests if k not in self.answers]
            # Only ids this client sent as requests (a malformed message's
            # id may be echoed in its -32600, twice if sent twice).
            doubles = [k for k, c in self.answers.items() if c > 1 and k in self.requests]
        rss, hwm = None, None
        summary = {
            "minutes": a.minutes, "batch": a.batch, "seed": a.seed, "batches": batches,
            "messages": self.messages, "requests": len(self.requests), "late": len(late),
            "lost": len(lost), "double_answers": len(doubles),
            "late_by_method": {m: sum(1 for _, lm, _ in late if lm == m) for m in sorted({lm for _, lm, _ in late})}, "null_id_errors": self.null_errors,
            "rss_min_mb": min(rss_seen) // 1024 if rss_seen else None,
            "rss_max_mb": max(rss_seen) // 1024 if rss_seen else None,
            # The heap's pages in use and freed-but-mapped (jemalloc), at the
            # batch with the most resident memory.
            "heap_at_rss_max_mb": heap_seen[rss_seen.index(max(rss_seen))] if (
                rss_seen and len(heap_seen) == len(rss_seen)) else None,
            "exit_code": code,
        }
        try:
            with open(os.path.join(self.root, "stderr.log"), "rb") as f:
                f.seek(0, 2)
                summary["stderr_bytes"] = f.tell()
        except OSError:
            pass
        for k, method, params in late[:20]:
            took = self.answered_at.get(k, float("nan")) - self.sent_at.get(k, float("nan"))
            print("late: id {} {} {} -> after {:.1f} s: {}".format(k, method, params, took,
                                                          self.answer_text.get(k, "(none)")))
        for k in doubles[:20]:
            print(f"double: id {k} {self.requests[k]}")
        for k in lost[:20]:
            print(f"lost: id {k} {self.requests[k]}")
        print(json.dumps(summary))
        bad = late or lost or doubles or code != 0 or (
            rss_seen and max(rss_seen) // 1024 > a.max_rss_mb)
        return 1 if bad else 0

    def heap_mb(self):
        """The server's heap (`fettle/stats`): MB in use, and freed but still
        mapped (jemalloc's dirty and muzzy pages). Not counted as a request."""
        rid = "stats-%d" % self.next_id
        self.next_id += 1
        with self.lock:
            self.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "fettle/stats"}).encode())
        key = json.dumps(rid)
        self.wait_for([key], 5)
        with self.lock:
            text = self.answer_text.get(key)
            full = self.stats_answers.pop(key, None)
        heap = (full or {}).get("heapBytes") if isinstance(full, dict) else None
        if not heap:
            return None
        mb = lambda n: n // (1 << 20)
        return {"active": mb(heap["active"]), "freed": mb(heap["dirty"] + heap["muzzy"])}

    def wait_for(self, keys, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.closed:
            with self.lock:
                if all(k in self.answers for k in keys):
                    return
            time.sleep(0.01)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("binary")
    p.add_argument("--minutes", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=200)
    p.add_argument("--seed", type=int, default=39)
    p.add_argument("--window", type=float, default=1.0)
    p.add_argument("--huge-mb", type=float, default=12.0)
    p.add_argument("--max-rss-mb", type=int, default=300)
    p.add_argument("--methods", help="comma-separated request methods to fuzz (default: all)")
    p.add_argument("--commands", help="comma-separated commands for workspace/executeCommand")
    p.add_argument("--only", help="comma-separated kinds: req,unknown,note,valid,malformed,huge")
    p.add_argument("--open-mb", type=float, action="append",
                   help="sizes (MB) of the documents opened and edited (default 0.5, 2 and --huge-mb)")
    p.add_argument("--agent-unknown-fields", action="store_true",
                   help="also send fettle.chat/fixDiagnostics argument objects with unknown fields")
    p.add_argument("--model", choices=["mock", "embedded"], default="mock",
                   help="mock: a scripted model on 127.0.0.1 for every feature (default); "
                        "embedded: the default configuration (the local model, if installed)")
    p.add_argument("--no-devices", action="store_true",
                   help="leave out URIs of devices, FIFOs and sockets")
    sys.exit(Soak(p.parse_args()).run())


main()
