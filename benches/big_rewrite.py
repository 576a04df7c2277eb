#!/usr/bin/env python3
"""`fettle.rewrite` of a huge selection, as a client sees it (issue 39).

Usage: python3 benches/big_rewrite.py FETTLE_BINARY MEGABYTES

Opens a Python file of `value = 1` lines (MEGABYTES MB) over real stdio
framing, asks `fettle.rewrite` for the whole file (the edit model is a
mock on an unused port: it must never be asked), and prints the time to
the answer, the answer's summary and the server's peak RSS (the server
runs under `/usr/bin/time -v`). The time includes nothing but the command:
the document is opened and outlined first.
"""
import json, os, subprocess, sys, tempfile, time

def frame(msg):
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body

def read(out):
    length = None
    while True:
        line = out.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(out.read(length))

def main():
    binary, mb = sys.argv[1], float(sys.argv[2])
    root = tempfile.mkdtemp()
    path = os.path.join(root, "big.py")
    uri = "file://" + path
    lines = int(mb * 1_000_000 / 10)
    text = "value = 1\n" * lines
    with open(path, "w") as f:
        f.write(text)
    cmd = ["/usr/bin/time", "-v", "-o", os.path.join(root, "rss.txt"), binary]
    env = dict(os.environ, FETTLE_LOG=os.environ.get("FETTLE_LOG", "warn"), XDG_CONFIG_HOME=root)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    send = lambda m: (p.stdin.write(frame(m)), p.stdin.flush())
    def wait_for(id_):
        while True:
            msg = read(p.stdout)
            if msg is None:
                sys.exit("stream closed")
            if msg.get("id") == id_ and "method" not in msg:
                return msg
            if "method" in msg and "id" in msg:
                send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
    options = {"models": {"mock": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1",
                                   "model": "mock-coder", "max_retries": 0}},
               "edit": {"model": "mock"}}
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": "file://" + root, "initializationOptions": options,
        "capabilities": {"workspace": {"applyEdit": True}}}})
    wait_for(1)
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": text}}})
    send({"jsonrpc": "2.0", "id": 2, "method": "textDocument/documentSymbol",
          "params": {"textDocument": {"uri": uri}}})
    wait_for(2)
    start = time.monotonic()
    send({"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand", "params": {
        "command": "fettle.rewrite", "arguments": [{"uri": uri, "version": 1,
        "instruction": "Use a constant", "range": {"start": {"line": 0, "character": 0},
                                                   "end": {"line": lines, "character": 0}}}]}})
    msg = wait_for(3)
    took = time.monotonic() - start
    print(f"{mb} MB: fettle.rewrite answered in {took:.2f} s: {json.dumps(msg.get('result') or msg.get('error'))[:300]}")
    send({"jsonrpc": "2.0", "id": 4, "method": "shutdown"})
    send({"jsonrpc": "2.0", "method": "exit"})
    p.wait(timeout=60)
    for line in open(os.path.join(root, "rss.txt")):
        if "Maximum resident" in line:
            print("server peak RSS:", line.split(":")[1].strip(), "KB")

main()
