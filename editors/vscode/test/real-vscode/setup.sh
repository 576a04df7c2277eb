# Sourced by test.sh: what the real-VS-Code check needs, installed into the
# cache on the first run: Node 24 (the platform package that npm's `node@24`
# installs, with its headers for native modules), code-server from npm built
# against it (needs libkrb5-dev), Debian's Chromium, Playwright from PyPI
# (its browser is never downloaded: the check launches Debian's). Sets
# `node24_bin` (prepend to PATH) and `code_server`.
# Expects: $cache, $cache/venv, install_packages (scripts/prerequisites.sh).

code_server_version=4.139.1
case "$(uname -m)" in
  x86_64) node_arch=x64 ;;
  aarch64 | arm64) node_arch=arm64 ;;
  *) node_arch="$(uname -m)" ;;
esac
node24="$cache/node24/node_modules/node-linux-$node_arch"
if [ ! -x "$node24/bin/node" ]; then
  echo "installing: Node 24 (npm node-linux-$node_arch@24)"
  npm install --silent --no-audit --no-fund --prefix "$cache/node24" "node-linux-$node_arch@24" >/dev/null
fi
[ -x "$node24/bin/node" ] || { echo "FATAL: Node 24 not found after install ($node24)" >&2; exit 1; }
node24_bin="$node24/bin"

need=()
dpkg -s libkrb5-dev >/dev/null 2>&1 || need+=(libkrb5-dev)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
install_packages "${need[@]}"

code_server_dir="$cache/code-server-$code_server_version"
code_server="$code_server_dir/node_modules/.bin/code-server"
if [ ! -f "$code_server_dir/.complete" ]; then
  echo "installing: code-server $code_server_version (npm; builds native modules for Node 24: a few minutes)"
  rm -rf "$code_server_dir"
  mkdir -p "$code_server_dir"
  PATH="$node24_bin:$PATH" npm_config_nodedir="$node24" \
    npm install --no-audit --no-fund --loglevel=error --prefix "$code_server_dir" "code-server@$code_server_version" >"$code_server_dir/install.log" 2>&1 \
    || { tail -n 40 "$code_server_dir/install.log" >&2; echo "FATAL: code-server $code_server_version did not install (log above)" >&2; exit 1; }
  touch "$code_server_dir/.complete"
fi
[ -x "$code_server" ] || { echo "FATAL: code-server not found ($code_server)" >&2; exit 1; }

"$cache/venv/bin/pip" install --quiet --disable-pip-version-check 'playwright>=1.45,<2'
