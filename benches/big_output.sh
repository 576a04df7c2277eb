#!/bin/sh
# `fettle fix --json` when a command writes a huge file and the tests print
# megabytes (issue 39): prints the stdout bytes, the wall time and the peak
# RSS of the fettle process.
#
# Usage: sh benches/big_output.sh FETTLE_BINARY [MEGABYTES]   (default 1024)
#
# The mock model (`fettle mock-model`) asks for one `run_command` that
# writes MEGABYTES of zeros to big.bin, then ends its turn; the test
# command prints 8 MB and passes once big.bin exists, so the task succeeds
# with big.bin among its changed files (its diff is what used to be huge).
set -eu
bin=$(realpath "$1")
mb=${2:-1024}
dir=$(mktemp -d)
trap 'kill "$mock_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
mkdir "$dir/ws" "$dir/cache"
cat > "$dir/script.json" <<EOF
{"responses": [
  {"tool_calls": [{"name": "run_command", "arguments": {"command": "head -c ${mb}M /dev/zero > big.bin"}}]},
  {"text": "Done."},
  {"text": "I wrote big.bin.", "repeat": true}
]}
EOF
printf 'yes ok | head -c 8000000\ntest -f big.bin\n' > "$dir/ws/check.sh"
"$bin" mock-model --script "$dir/script.json" > "$dir/addr" &
mock_pid=$!
for _ in $(seq 100); do grep -q listening "$dir/addr" 2>/dev/null && break; sleep 0.1; done
url=$(sed 's/listening on //' "$dir/addr")
printf '[models.mock]\nprovider = "openai"\nbase_url = "%s/v1"\nmodel = "mock-coder"\nmax_retries = 0\n\n[agent]\nmodel = "mock"\n' "$url" > "$dir/ws/fettle.toml"
start=$(date +%s.%N)
FETTLE_CACHE_DIR="$dir/cache" XDG_CONFIG_HOME="$dir/cache/none" \
  /usr/bin/time -v -o "$dir/time.txt" \
  "$bin" fix --json --yes --max-iterations 1 --test "sh check.sh" "$dir/ws" \
  < /dev/null 2> "$dir/stderr" | wc -c > "$dir/bytes" || true
end=$(date +%s.%N)
echo "stdout bytes: $(cat "$dir/bytes")"
echo "wall: $(echo "$end - $start" | bc) s"
grep "Maximum resident" "$dir/time.txt"
tail -3 "$dir/stderr"
