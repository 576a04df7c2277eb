#!/usr/bin/env bash
# Builds huggingface/llm-ls for the side-by-side completion benchmark and
# prints the binary's path:
#
#   cargo bench --bench completion -- --llm-ls "$(bash benches/llm_ls.sh)"
#
# The source comes from $LLM_LS_SRC (a checkout) or is cloned into
# ${XDG_CACHE_HOME:-$HOME/.cache}/fettle-bench/llm-ls (never into this
# repository). Where neither works (no network), it says so on stderr and
# prints nothing: the benchmark then runs Fettle alone and the recorded
# numbers in docs/performance.md stand in for llm-ls's.
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/fettle-bench"
src="${LLM_LS_SRC:-$cache/llm-ls}"
if [ ! -f "$src/Cargo.toml" ]; then
    mkdir -p "$cache"
    if ! timeout 120 git clone --quiet --depth 1 https://github.com/huggingface/llm-ls "$src" >&2; then
        echo "llm_ls.sh: cannot get llm-ls (no \$LLM_LS_SRC, clone failed): skipping it" >&2
        exit 0
    fi
fi
# Its own target dir: never mixed with Fettle's.
target="$cache/llm-ls-target"
if ! (cd "$src" && cargo build --release --locked -p llm-ls --target-dir "$target" >&2); then
    echo "llm_ls.sh: building llm-ls failed: skipping it" >&2
    exit 0
fi
echo "$target/release/llm-ls"
