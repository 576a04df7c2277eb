#!/usr/bin/env python3
"""The embedded model's speed in two builds of `fettle` (issue 18: the
portable x86-64-v3 build against the native one), as an editor sees it.

Usage: python3 benches/portable_native.py NAME=BINARY [NAME=BINARY ...] [--rounds N]

For each binary, alternating, N rounds: a fresh server over real stdio
framing, the default embedded model, one new document per request (so
every prompt is evaluated from scratch, no KV cache reuse; warm-ups off), 8 requests at
different places of a 40-function Python file. From `fettle/stats`'
`localModel` after each request: prompt tokens and prefill time (prompt
evaluation speed), generated tokens and the rest of the model time (decode
speed). Prints the medians per binary.
"""
import json, os, statistics, subprocess, sys, tempfile, time

def frame(msg):
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body

def read(out):
    length = None
    while True:
        line = out.readline()
        if not line:
            raise EOFError("server closed")
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(out.read(length))

class Server:
    def __init__(self, binary, root):
        self.p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.next = 0
        uri = "file://" + root
        self.request("initialize", {"processId": os.getpid(), "rootUri": uri,
            "workspaceFolders": [{"uri": uri, "name": "ws"}], "capabilities": {},
            "initializationOptions": {"completion": {"multiline": "always", "latency_target_ms": 60000,
                                                       "max_prompt_tokens": 600, "debounce_ms": 0,
                                                       "warm_after_ms": 0}}})
        self.notify("initialized", {})

    def notify(self, method, params):
        self.p.stdin.write(frame({"jsonrpc": "2.0", "method": method, "params": params}))
        self.p.stdin.flush()

    def request(self, method, params):
        self.next += 1
        rid = self.next
        self.p.stdin.write(frame({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        self.p.stdin.flush()
        while True:
            msg = read(self.p.stdout)
            if msg.get("id") == rid and "method" not in msg:
                return msg.get("result")
            if "method" in msg and "id" in msg:  # a server request: accept it
                self.p.stdin.write(frame({"jsonrpc": "2.0", "id": msg["id"], "result": None}))
                self.p.stdin.flush()

    def close(self):
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.p.wait(timeout=10)
        except Exception:
            self.p.kill()

def source(seed):
    funcs = []
    for i in range(40):
        funcs.append(f"def step_{seed}_{i}(values, scale):\n    \"\"\"Scale the {i}th batch.\"\"\"\n"
                     f"    total = sum(v * scale for v in values)\n    return total + {i * seed}\n")
    return "\n\n".join(funcs) + "\n\n\ndef summarize(values):\n    "

def round_of(binary, root, seed):
    server = Server(binary, root)
    samples = []
    try:
        for k in range(8):
            text = source(seed * 100 + k)
            uri = f"file://{root}/m_{seed}_{k}.py"
            server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
            lines = text.split("\n")
            server.request("textDocument/inlineCompletion", {"textDocument": {"uri": uri},
                "position": {"line": len(lines) - 1, "character": len(lines[-1])}, "context": {"triggerKind": 2}})
            local = (server.request("fettle/stats", {}) or {}).get("localModel") or {}
            if local.get("promptTokens"):
                samples.append(local)
    finally:
        server.close()
    return samples

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    builds = [a.split("=", 1) for a in args if "=" in a]
    root = tempfile.mkdtemp()
    results = {name: [] for name, _ in builds}
    for r in range(rounds):
        for name, binary in builds:
            results[name] += round_of(binary, root, r * 10 + len(name))
    for name, binary in builds:
        s = [x for x in results[name] if x.get("prefillMs")]
        # The first request of each server also loads the weights: its
        # prefill is still only the prompt's, so every sample counts.
        # Tokens evaluated: the prompt less what the KV cache already had.
        prefill = statistics.median((x["promptTokens"] - x.get("reusedTokens", 0)) / (x["prefillMs"] / 1000) for x in s)
        reused = statistics.median(x.get("reusedTokens", 0) for x in s)
        first = statistics.median(x["firstTokenMs"] for x in s)
        tokens = statistics.median(x["promptTokens"] for x in s)
        decoding = [x for x in s if x.get("generatedTokens", 0) > 4 and x.get("totalMs", 0) > x["firstTokenMs"]]
        decode = statistics.median((x["generatedTokens"] - 1) / ((x["totalMs"] - x["firstTokenMs"]) / 1000) for x in decoding) if decoding else float("nan")
        print(f"{name}: {os.path.getsize(binary) / 1e6:.0f} MB; {len(s)} requests; prompt {tokens:.0f} tokens ({reused:.0f} reused): "
              f"prefill {prefill:.0f} tok/s, first token {first:.0f} ms, decode {decode:.0f} tok/s (medians)")

if __name__ == "__main__":
    main()
