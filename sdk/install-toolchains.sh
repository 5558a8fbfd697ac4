#!/usr/bin/env bash
# Install every pinned toolchain the JavaScript, Python and C pack SDKs need.
# Idempotent: what is already installed at the pinned version is skipped.
#
#   sdk/install-toolchains.sh            # everything
#   sdk/install-toolchains.sh js python  # only some languages (js, python, c)
#
# Installs (as root for apt; cargo binaries into ~/.cargo/bin); prints the
# version of every Debian package it relies on:
#   all:    jq (reads pack.json)
#   js:     componentize-qjs (npm, into sdk/js/node_modules from package-lock.json)
#   python: componentize-py (PyPI, into the venv sdk/python/.venv)
#   c:      clang-19, lld-19, compiler-rt for wasm32, wasi-libc (Debian 12),
#           wit-bindgen-cli and wasm-component-ld (crates.io, cargo install --locked)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# ---- pins ----------------------------------------------------------------
# Registries that keep every version (npm, PyPI, crates.io) are pinned
# exactly. Debian packages are pinned by name to a major version (clang-19,
# lld-19): Debian drops superseded revisions from its archive, so an exact
# revision would stop installing the day it is replaced.
COMPONENTIZE_QJS_VERSION="0.4.5"          # also pinned in sdk/js/package.json + lock
COMPONENTIZE_PY_VERSION="0.25.1"
CLANG_MAJOR="19"                          # clang-19, lld-19, libclang-rt-19-dev-wasm32
WIT_BINDGEN_CLI_VERSION="0.63.0"          # = wit-bindgen in sample-packs/Cargo.lock
WASM_COMPONENT_LD_VERSION="0.5.31"

langs=("$@")
[[ ${#langs[@]} -eq 0 ]] && langs=(js python c)
want() { local l; for l in "${langs[@]}"; do [[ "$l" == "$1" ]] && return 0; done; return 1; }

nice_run() { nice -n 10 "$@"; }
apt_updated=""
# apt_need <package>...: install the packages that are missing, and nothing
# else: --no-upgrade leaves every installed package (these included) at its
# version, so the script never upgrades the system as a side effect.
apt_need() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    if [[ -z "$apt_updated" ]]; then
      apt-get update -qq
      apt_updated=1
    fi
    echo "apt: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive nice_run apt-get install -y -qq --no-install-recommends --no-upgrade "${missing[@]}"
  fi
  for pkg in "$@"; do
    echo "apt: $pkg $(dpkg-query -W -f='${Version}' "$pkg")" >&2
  done
}

# cargo_pin <crate> <version> <binary>: cargo install --locked unless present.
cargo_pin() {
  local crate="$1" ver="$2" bin="$3"
  if command -v "$bin" >/dev/null 2>&1 && cargo install --list | grep -x "$crate v$ver:" >/dev/null; then
    return 0
  fi
  echo "cargo: installing $crate@$ver" >&2
  nice_run cargo install --locked "$crate@$ver"
}

apt_need jq

if want js; then
  have="$(cd "$here/js" && node -p 'require("./node_modules/componentize-qjs/package.json").version' 2>/dev/null || true)"
  if [[ "$have" != "$COMPONENTIZE_QJS_VERSION" ]]; then
    echo "npm: installing componentize-qjs@$COMPONENTIZE_QJS_VERSION" >&2
    (cd "$here/js" && nice_run npm ci --no-audit --no-fund)
  fi
fi

if want python; then
  venv="$here/python/.venv"
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  have="$("$venv/bin/python" -m pip show componentize-py 2>/dev/null | sed -n 's/^Version: //p' || true)"
  if [[ "$have" != "$COMPONENTIZE_PY_VERSION" ]]; then
    echo "pip: installing componentize-py==$COMPONENTIZE_PY_VERSION" >&2
    nice_run "$venv/bin/python" -m pip install -q "componentize-py==$COMPONENTIZE_PY_VERSION"
  fi
fi

if want c; then
  apt_need "clang-$CLANG_MAJOR" "lld-$CLANG_MAJOR" "libclang-rt-$CLANG_MAJOR-dev-wasm32" wasi-libc
  cargo_pin wit-bindgen-cli "$WIT_BINDGEN_CLI_VERSION" wit-bindgen
  cargo_pin wasm-component-ld "$WASM_COMPONENT_LD_VERSION" wasm-component-ld
fi

echo "toolchains ready: ${langs[*]}" >&2
