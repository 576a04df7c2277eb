# Sourced by install.sh and test.sh: what building Fettle needs besides
# Rust (llama.cpp, the embedded model's engine, is compiled from source:
# CMake, libclang for bindgen, a C++ compiler), installed when possible,
# else one line saying how.

# libclang itself (libclang.so / libclang-NN.so), not libclang-cpp, which
# some machines carry without it.
have_libclang() {
  local f
  for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
    /usr/lib/*-linux-gnu/libclang.so* /usr/lib/*-linux-gnu/libclang-[0-9]*.so* \
    /usr/lib64/libclang.so* /usr/local/lib/libclang.so* ${LIBCLANG_PATH:+"$LIBCLANG_PATH"/libclang*.so*}; do
    [ -e "$f" ] && return 0
  done
  return 1
}

# Prints the missing Debian package names (cmake libclang-dev g++).
missing_build_tools() {
  local need=()
  command -v cmake >/dev/null 2>&1 || need+=(cmake)
  have_libclang || need+=(libclang-dev)
  command -v c++ >/dev/null 2>&1 || need+=(g++)
  echo "${need[*]:-}"
}

# Installs Debian packages "$@" with apt-get (as root, or with sudo when it
# needs no password); otherwise says exactly what to run and fails.
install_packages() {
  [ "$#" -gt 0 ] || return 0
  local sudo_=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo_="sudo"
    else
      sudo_="none"
    fi
  fi
  if command -v apt-get >/dev/null 2>&1 && [ "$sudo_" != "none" ]; then
    echo "installing: $*"
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "$@" >/dev/null
    return 0
  fi
  if command -v apt-get >/dev/null 2>&1; then
    echo "FATAL: missing $*: run \`sudo apt-get install -y $*\`, then run this again" >&2
  elif command -v dnf >/dev/null 2>&1; then
    echo "FATAL: missing $*: run \`sudo dnf install -y cmake clang-devel gcc-c++\`, then run this again" >&2
  elif command -v brew >/dev/null 2>&1; then
    echo "FATAL: missing $*: run \`brew install cmake llvm\`, then run this again" >&2
  else
    echo "FATAL: missing $* (Debian package names): install CMake, libclang and a C++ compiler, then run this again" >&2
  fi
  return 1
}

# Makes sure Rust and the build tools are there.
ensure_build_tools() {
  command -v cargo >/dev/null 2>&1 || {
    echo "FATAL: no Rust toolchain: install it from https://rustup.rs (\`curl https://sh.rustup.rs -sSf | sh\`), then run this again" >&2
    return 1
  }
  local need
  need="$(missing_build_tools)"
  # shellcheck disable=SC2086 # a list of package names
  [ -z "$need" ] || install_packages $need
}
