#!/usr/bin/env python3
"""documentSymbol on a huge document, measured as a client sees it (issue 11).

Usage: /usr/bin/time -v python3 benches/huge_symbols.py FETTLE_BINARY MEGABYTES [--rss] [--source FILE]

Opens a Python file of `x = 1` lines (MEGABYTES MB) over real stdio framing,
asks for its outline (with `--source FILE`: FILE's text repeated to
MEGABYTES MB, its language from its extension, e.g. real code), then for a small document's outline (is the stream
still in sync?), and prints the time and the response size. `/usr/bin/time
-v` reports the peak RSS: of the server only when run as
`... --rss`, which wraps the server itself in `/usr/bin/time -v`.
"""
import json
import os
import subprocess
import sys
import tempfile
import time


def frame(msg):
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body

def read(out):
    length = None
    while True:
        line = out.readline()
        if not line:
            return None, 0
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    body = out.read(length)
    return json.loads(body), len(body)

def main():
    binary, mb = sys.argv[1], float(sys.argv[2])
    rss = "--rss" in sys.argv
    root = tempfile.mkdtemp()
    uri = "file://" + os.path.join(root, "huge.py")
    text = "x = 1\n" * int(mb * 1_000_000 / 6)
    if "--source" in sys.argv:
        source = sys.argv[sys.argv.index("--source") + 1]
        unit = open(source, encoding="utf-8", errors="replace").read()
        text = (unit * (int(mb * 1_000_000) // max(len(unit), 1) + 1))[: int(mb * 1_000_000)]
        uri = "file://" + os.path.join(root, "huge" + os.path.splitext(source)[1])
    cmd = [binary]
    if rss:
        cmd = ["/usr/bin/time", "-v", "-o", os.path.join(root, "rss.txt")] + cmd
    env = dict(os.environ, FETTLE_LOG=os.environ.get("FETTLE_LOG", "warn"), XDG_CONFIG_HOME=root)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    send = lambda m: (p.stdin.write(frame(m)), p.stdin.flush())
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": "file://" + root, "capabilities": {
            "textDocument": {"documentSymbol": {"hierarchicalDocumentSymbolSupport": True}}}}})
    while read(p.stdout)[0].get("id") != 1:
        pass
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "", "version": 1, "text": text}}})
    start = time.monotonic()
    send({"jsonrpc": "2.0", "id": 2, "method": "textDocument/documentSymbol",
          "params": {"textDocument": {"uri": uri}}})
    while True:
        msg, size = read(p.stdout)
        if msg is None:
            print("stream closed"); break
        if msg.get("id") == 2:
            took = time.monotonic() - start
            n = len(msg.get("result") or [])
            print(f"{mb} MB: documentSymbol {took:.2f} s, {size} bytes, {n} symbols, error={msg.get('error')}")
            break
        if "method" in msg and "id" in msg:  # answer server requests
            send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
    small = "file://" + os.path.join(root, "small.py")
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": small, "languageId": "python", "version": 1, "text": "def f():\n    pass\n"}}})
    send({"jsonrpc": "2.0", "id": 3, "method": "textDocument/documentSymbol",
          "params": {"textDocument": {"uri": small}}})
    while True:
        msg, _ = read(p.stdout)
        if msg is None:
            print("next request: stream closed (lost)"); break
        if msg.get("id") == 3:
            print("next request answered:", [s["name"] for s in msg["result"]]); break
        if "method" in msg and "id" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
    send({"jsonrpc": "2.0", "id": 4, "method": "shutdown"})
    send({"jsonrpc": "2.0", "method": "exit"})
    p.wait(timeout=60)
    if rss:
        for line in open(os.path.join(root, "rss.txt")):
            if "Maximum resident" in line:
                print("server peak RSS:", line.split(":")[1].strip(), "KB")

main()
