#!/usr/bin/env python3
"""The extension in a real VS Code: code-server (VS Code in a browser)
driven by Chromium through Playwright, with the real `fettle` binary and
its mock model on 127.0.0.1.

What a user does, key by key, and what they must see: the extension
activates and shows its status bar item; the server log is in the Fettle
output channel; ghost text is drawn while typing and Tab accepts it;
Rewrite Selection… with a preset and with a typed instruction, each undone
by Ctrl+Z; Chat… (its answer in the Fettle Chat output); Show Last Task's
Diff; Undo Last Task; Fix Diagnostics in This File. Each step's failure
says what was missing and keeps a screenshot (and the page's text) in
--artifacts; the code-server and fettle logs are printed.

Run by ./test.sh; by hand:
  python3 editors/vscode/test/real-vscode/check.py --code-server BIN \\
      --fettle target/debug/fettle --vsix editors/vscode/fettle.vsix
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SHOP = (
    "import os\n\n\n"
    "def total(items):\n    return 0\n\n\n"
    "def describe(item):\n    return str(item)\n"
)
DOCSTRING = '"""The sum of the items."""'

# The mock model's answers, first match wins (`repeat` ones stay):
# completions for ghost text, an edit for a task, a code block for a rewrite.
SCRIPT = {
    "responses": [
        {"when": {"path": "/v1/completions"}, "text": "item.name", "repeat": True},
        {
            "when": {"path": "/v1/chat/completions", "contains": '"tools"'},
            "tool_calls": [
                {
                    "name": "edit",
                    "arguments": {
                        "path": "shop.py",
                        "search": "    return 0\n",
                        "replace": "    return sum(items)\n",
                    },
                }
            ],
        },
        {
            "when": {"path": "/v1/chat/completions", "contains": '"tools"'},
            "text": "total() now sums the items.",
            "repeat": True,
        },
        {
            "when": {"path": "/v1/chat/completions"},
            "text": f"```python\ndef total(items):\n    {DOCSTRING}\n    return 0\n```",
            "repeat": True,
        },
    ]
}


class StepFailed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mock(fettle: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    script = tmp / "script.json"
    script.write_text(json.dumps(SCRIPT))
    proc = subprocess.Popen(
        [fettle, "mock-model", "--script", str(script), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=open(tmp / "mock.log", "w"),
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        found = re.search(r"listening on (\S+)", line)
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
    raise SystemExit(f"FATAL: the mock model did not start (see {tmp / 'mock.log'})")


def wait_http(url: str, proc: subprocess.Popen, log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"FATAL: code-server exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"FATAL: code-server not answering at {url} after {seconds:.0f} s:\n{log.read_text()[-4000:]}")


class Ui:
    """The workbench, as a user drives it: keys, the command palette, what is shown."""

    def __init__(self, page, artifacts: Path, workspace: Path, data: Path, fettle: str):
        self.page = page
        self.data = data
        self.fettle = fettle
        self.artifacts = artifacts
        self.workspace = workspace
        self.step = "start"
        self.timings: list[tuple[str, float]] = []

    def run(self, name: str, action) -> None:
        self.step = name
        started = time.monotonic()
        print(f"--- {name}", flush=True)
        try:
            action()
        except Exception as error:  # a step's failure, whatever raised it
            self.keep(name)
            raise StepFailed(f"{name}: {error}") from error
        took = time.monotonic() - started
        self.timings.append((name, took))
        print(f"    ok ({took:.1f} s)", flush=True)

    def keep(self, name: str) -> None:
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        try:
            self.page.screenshot(path=str(self.artifacts / f"{slug}.png"))
            (self.artifacts / f"{slug}.txt").write_text(self.page.inner_text("body"))
            print(f"    kept {self.artifacts / slug}.png and .txt", flush=True)
        except Exception as error:  # the page may be gone
            print(f"    no screenshot: {error}", flush=True)

    def command(self, title: str) -> None:
        """Runs a command from the palette by its title."""
        self.page.keyboard.press("F1")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible", timeout=10_000)
        box.fill(f">{title}")
        row = self.page.locator(".quick-input-list .monaco-list-row", has_text=title).first
        row.wait_for(state="visible", timeout=10_000)
        self.page.keyboard.press("Enter")

    def quick_pick(self, label: str) -> None:
        row = self.page.locator(".quick-input-list .monaco-list-row", has_text=label).first
        row.wait_for(state="visible", timeout=15_000)
        row.click()

    def type_input(self, text: str) -> None:
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible", timeout=10_000)
        box.fill(text)
        self.page.keyboard.press("Enter")

    def open_file(self, name: str) -> None:
        """Quick Open (Ctrl+P) the file `name`."""
        self.page.keyboard.press("Control+P")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible", timeout=10_000)
        box.fill(name)
        self.page.locator(".quick-input-list .monaco-list-row", has_text=name).first.wait_for(state="visible", timeout=15_000)
        self.page.keyboard.press("Enter")
        self.page.locator(".tab.active", has_text=name).first.wait_for(timeout=15_000)

    def notification(self, pattern: str, timeout_ms: int = 60_000):
        toast = self.page.locator(".notification-toast", has_text=re.compile(pattern)).first
        toast.wait_for(state="visible", timeout=timeout_ms)
        print(f"    notification: {' '.join(toast.inner_text().split())[:200]}", flush=True)
        return toast

    def clear_notifications(self) -> None:
        self.command("Notifications: Clear All Notifications")

    def editor(self):
        return self.page.locator(".monaco-editor .view-lines").first

    def editor_text(self) -> str:
        # The rendered lines use non-breaking spaces.
        return self.editor().inner_text().replace("\u00a0", " ")

    def save(self) -> None:
        self.page.keyboard.press("Control+S")

    def file_text(self, name: str = "shop.py") -> str:
        return (self.workspace / name).read_text()

    def wait_file(self, predicate, what: str, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            self.save()
            time.sleep(0.5)
            text = self.file_text()
            if predicate(text):
                return text
        raise StepFailed(f"shop.py never {what}; it is:\n{text}")

    def go_to_line(self, line: int) -> None:
        self.page.keyboard.press("Control+G")
        self.type_input(f":{line}")

    def server_log(self) -> str:
        """The Fettle output channel as VS Code writes it to disk."""
        return "".join(p.read_text(errors="replace") for p in sorted(self.data.glob("logs/**/*Fettle.log")))

    def wait_log(self, pattern: str, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.server_log()
            if re.search(pattern, text):
                return text
            time.sleep(0.5)
        raise StepFailed(f"the Fettle output has no /{pattern}/; it has:\n{self.server_log()[-3000:]}")

    def output(self, channel: str, pattern: str, timeout_ms: int = 30_000) -> None:
        """The Output panel showing `channel` with text matching `pattern`."""
        panel = self.page.locator(".output-view, .panel .monaco-editor").first
        panel.wait_for(state="visible", timeout=timeout_ms)
        shown = self.page.locator(".panel .monaco-editor .view-lines", has_text=re.compile(pattern)).first
        shown.wait_for(state="visible", timeout=timeout_ms)


def steps(ui: Ui) -> None:
    page = ui.page

    def activation() -> None:
        page.locator(".monaco-workbench").wait_for(state="visible", timeout=90_000)
        ui.open_file("shop.py")
        page.locator(".monaco-editor .view-lines", has_text="def total").first.wait_for(timeout=30_000)
        page.locator(".statusbar-item", has_text="Fettle").first.wait_for(timeout=60_000)

    def output_channel() -> None:
        ui.command("Fettle: Show Server Log")
        ui.output("Fettle", r"\S")
        # The server the extension started is the one fettle.server.path
        # names in the User settings (a remote window's settings arrive
        # late: the extension must not settle for a fettle on PATH).
        started = ui.wait_log(rf"Starting {re.escape(ui.fettle)} \(from setting;")
        if "configuration applied" not in started:
            ui.wait_log(r"configuration applied")
        page.keyboard.press("Control+J")  # the panel away again

    def ghost_text() -> None:
        ui.editor().click()
        page.keyboard.press("Control+End")
        page.keyboard.type("    label = ")
        ghost = page.locator(".ghost-text-decoration, .ghost-text", has_text="item.name").first
        ghost.wait_for(state="visible", timeout=30_000)
        page.keyboard.press("Tab")
        text = ui.wait_file(lambda t: "label = item.name" in t, "got the accepted suggestion")
        if "label = item.nameitem.name" in text:
            raise StepFailed(f"the suggestion was inserted twice:\n{text}")
        # Ctrl+Z takes the suggestion back first, then the typing.
        page.keyboard.press("Control+Z")
        ui.wait_file(lambda t: "item.name" not in t and "label =" in t, "lost the suggestion with Ctrl+Z")
        for _ in range(8):
            if ui.file_text() == SHOP:
                break
            page.keyboard.press("Control+Z")
            ui.save()
            time.sleep(0.3)
        ui.wait_file(lambda t: t == SHOP, "came back to what it was with Ctrl+Z")

    def select_total() -> None:
        ui.editor().click()
        ui.go_to_line(4)
        page.keyboard.press("Home")
        page.keyboard.press("Shift+ArrowDown")
        page.keyboard.press("Shift+End")

    def rewrite(pick: str, instruction: str | None = None) -> None:
        """Rewrite Selection… on `total`: a preset, or one's own words."""
        select_total()
        ui.command("Fettle: Rewrite Selection…")
        # The presets are the server's edit actions (`edit.actions`).
        ui.quick_pick(pick)
        if instruction is not None:
            ui.type_input(instruction)
        ui.notification(r"Fettle: rewrote")
        ui.wait_file(lambda t: DOCSTRING in t, "got the rewrite")
        ui.editor().click()
        page.keyboard.press("Control+Z")
        ui.wait_file(lambda t: t == SHOP, "came back with Ctrl+Z")
        ui.clear_notifications()

    def chat() -> None:
        ui.command("Fettle: Chat…")
        ui.type_input("make total() sum the items")
        ui.notification(r"success", timeout_ms=120_000)
        ui.output("Fettle Chat", r"\[success\]")
        ui.wait_file(lambda t: "return sum(items)" in t, "got the chat's edit")

    def follow_up() -> None:
        ui.clear_notifications()
        ui.command("Fettle: Chat…")
        # The second message continues the conversation, and says so.
        page.locator(".quick-input-widget", has_text="follow-up").first.wait_for(timeout=10_000)
        ui.type_input("now explain what you changed")
        ui.notification(r"Fettle: [a-z ]+ —", timeout_ms=120_000)
        ui.output("Fettle Chat", r"\[(success|gave_up|failed)\]")
        log = "".join(p.read_text() for p in ui.data.glob("logs/**/*Fettle Chat.log"))
        if log.count("You: ") != 2 or "new conversation" in log or log.count("\n[") < 2:
            raise StepFailed(f"the Fettle Chat output is not one conversation of two answered messages:\n{log}")

    def show_diff() -> None:
        ui.command("Fettle: Show Last Task's Diff")
        page.locator(".tab", has_text="Fettle task").first.wait_for(timeout=30_000)
        diff = page.locator(".monaco-diff-editor").first
        diff.wait_for(timeout=30_000)
        # Before the task on the left, the chat's change on the right.
        diff.locator(".editor.original .view-lines", has_text="return 0").wait_for(timeout=10_000)
        diff.locator(".editor.modified .view-lines", has_text="return sum(items)").wait_for(timeout=10_000)

    def undo_task() -> None:
        ui.clear_notifications()
        ui.command("Fettle: Undo Last Task")
        ui.notification(r"restored 1 file")
        ui.wait_file(lambda t: t == SHOP, "was restored by Undo Last Task")

    def fix_diagnostics() -> None:
        ui.clear_notifications()
        ui.open_file("shop.py")
        ui.command("Fettle: Fix Diagnostics in This File")
        ui.notification(r"Fettle: [a-z ]+ —|Fettle: no ", timeout_ms=120_000)

    ui.run("activation and the status bar", activation)
    ui.run("the server log in the output channel", output_channel)
    ui.run("ghost text drawn and accepted with Tab", ghost_text)
    ui.run("Rewrite Selection… with a preset, Ctrl+Z", lambda: rewrite("Add documentation"))
    ui.run(
        "Rewrite Selection… with a typed instruction, Ctrl+Z",
        lambda: rewrite("Type an instruction", "add a docstring"),
    )
    ui.run("Chat…", chat)
    ui.run("Chat…, a follow-up in the same conversation", follow_up)
    ui.run("Show Last Task's Diff", show_diff)
    ui.run("Undo Last Task", undo_task)
    ui.run("Fix Diagnostics in This File", fix_diagnostics)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code-server", required=True, help="the code-server executable")
    ap.add_argument("--fettle", required=True, help="the fettle binary")
    ap.add_argument("--vsix", required=True, help="the packaged extension")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--artifacts", default=None, help="where screenshots go (default: in the temporary folder, kept on failure)")
    ap.add_argument("--headed", action="store_true", help="show the browser (needs a display)")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright  # PyPI playwright, the browser is Debian's

    tmp = Path(tempfile.mkdtemp(prefix="fettle-code-server-"))
    artifacts = Path(args.artifacts) if args.artifacts else tmp / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    workspace = tmp / "ws"
    workspace.mkdir()
    (workspace / "shop.py").write_text(SHOP)
    home = tmp / "home"
    data = tmp / "data"
    extensions = tmp / "extensions"
    (data / "User").mkdir(parents=True)
    home.mkdir()
    fettle = str(Path(args.fettle).resolve())

    mock, mock_url = start_mock(fettle, tmp)
    settings = {
        # What a user sets in their User settings (a remote window's too).
        "fettle.server.path": fettle,
        "fettle.models": {
            "mock": {
                "provider": "openai",
                "base_url": f"{mock_url}/v1",
                "model": "starcoder2-3b",
                "fim_template": "starcoder",
                "max_retries": 0,
            }
        },
        "fettle.completion.model": "mock",
        "fettle.completion.multiline": "never",
        "fettle.edit.model": "mock",
        "fettle.agent.model": "mock",
        "fettle.agent.test_command": "true",
        "fettle.log.level": "info",
        # A quiet workbench: no welcome page, no trust prompt, no tours.
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "workbench.tips.enabled": False,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": False,
        "editor.inlineSuggest.enabled": True,
        "files.autoSave": "off",
        "window.restoreWindows": "none",
        "chat.disableAIFeatures": True,
    }
    (data / "User" / "settings.json").write_text(json.dumps(settings, indent=2))
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    base = [args.code_server, "--user-data-dir", str(data), "--extensions-dir", str(extensions)]
    installed = subprocess.run(
        base + ["--install-extension", str(Path(args.vsix).resolve())],
        env=env, capture_output=True, text=True, timeout=300,
    )
    print(installed.stdout.strip())
    if installed.returncode != 0:
        print(installed.stderr, file=sys.stderr)
        raise SystemExit(f"FATAL: code-server could not install {args.vsix}")

    port = free_port()
    log = tmp / "code-server.log"
    server = subprocess.Popen(
        base
        + [
            "--auth", "none",
            "--bind-addr", f"127.0.0.1:{port}",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--disable-getting-started-override",
            str(workspace),
        ],
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    failed: str | None = None
    ui: Ui | None = None
    try:
        wait_http(f"{url}/healthz", server, log, 120)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=args.chromium,
                headless=not args.headed,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.goto(f"{url}/?folder={workspace}", wait_until="domcontentloaded")
            ui = Ui(page, artifacts, workspace, data, fettle)
            try:
                steps(ui)
                page.screenshot(path=str(artifacts / "passed.png"))
            except StepFailed as error:
                failed = str(error)
            browser.close()
    finally:
        server.terminate()
        mock.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    if ui is not None:
        total = sum(t for _, t in ui.timings)
        print(f"steps passed: {len(ui.timings)} in {total:.1f} s")
    if failed:
        print(f"\nFAILED: {failed}", file=sys.stderr)
        print(f"screenshots and page text: {artifacts}", file=sys.stderr)
        print("--- code-server log (end)", file=sys.stderr)
        print(log.read_text()[-6000:], file=sys.stderr)
        for server_log in sorted(data.glob("logs/**/*Fettle*.log")):  # the output channels
            print(f"--- {server_log}", file=sys.stderr)
            print(server_log.read_text()[-6000:], file=sys.stderr)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"real VS Code: every step passed (the last screen: {artifacts / 'passed.png'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
