#!/usr/bin/env bash
# Builds the JavaScript engine (QuickJS behind openwop:node-pack) and writes
# ../engine.wasm, the bytes `wop` embeds. Needs the pinned toolchain with
# wasm32-wasip1, clang (Debian clang-19), wasi-libc and llvm-ar: rquickjs
# compiles QuickJS's C for wasm32 with them. It looks for a WASI SDK at
# $WASI_SDK; without one this script assembles an equivalent from the
# Debian packages (a directory of symlinks).
#
#   runtime/wop-js/engine/build.sh          # rebuild ../engine.wasm
#   runtime/wop-js/engine/build.sh --check  # rebuild, fail if it differs
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/../engine.wasm"
target_dir="${WOP_JS_ENGINE_TARGET:-$here/../../../target/js-engine}"
mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd -P)"

if [[ -z "${WASI_SDK:-}" ]]; then
  sdk="$target_dir/wasi-sdk"
  clang="$(command -v clang-19 || command -v clang || true)"
  ar="$(command -v llvm-ar-19 || command -v llvm-ar || true)"
  [[ -n "$clang" && -n "$ar" ]] || { echo "build.sh: clang-19 and llvm-ar are needed (apt install clang-19 llvm-19 wasi-libc)" >&2; exit 2; }
  [[ -d /usr/include/wasm32-wasi ]] || { echo "build.sh: wasi-libc is needed (apt install wasi-libc)" >&2; exit 2; }
  rm -rf "$sdk"; mkdir -p "$sdk/bin" "$sdk/share/wasi-sysroot/lib"
  printf '#!/bin/sh\nexec %s "$@"\n' "$clang" >"$sdk/bin/clang"; chmod +x "$sdk/bin/clang"
  ln -s "$ar" "$sdk/bin/ar"
  ln -s /usr/include/wasm32-wasi "$sdk/share/wasi-sysroot/include"
  for t in wasm32-wasi wasm32-wasip1; do ln -s /usr/lib/wasm32-wasi "$sdk/share/wasi-sysroot/lib/$t"; done
  export WASI_SDK="$sdk"
fi

# Reproducible: no host paths in the output (QuickJS's asserts name their
# C files, which rquickjs-sys copies into the target directory).
export RUSTFLAGS="--remap-path-prefix=$here=/wop-js-engine --remap-path-prefix=$HOME/.cargo=/cargo --remap-path-prefix=$target_dir=/target"
export CFLAGS_wasm32_wasip1="-ffile-prefix-map=$HOME/.cargo=/cargo -ffile-prefix-map=$target_dir=/target"
(cd "$here" && rustup target list --installed | grep -x wasm32-wasip1) >/dev/null || (cd "$here" && rustup target add wasm32-wasip1 >&2)
(cd "$here" && cargo build --locked --release --target wasm32-wasip1 --target-dir "$target_dir")
built="$target_dir/wasm32-wasip1/release/wop_js_engine.wasm"
# What built it: the bytes are reproducible for the same tools.
tools="$(cd "$here" && rustc --version); $("$WASI_SDK/bin/clang" --version | sed -n 1p); wasi-libc $(dpkg-query -W -f='${Version}' wasi-libc 2>/dev/null || echo unknown)"
if [[ "${1:-}" == "--check" ]]; then
  if cmp -s "$built" "$out"; then echo "engine.wasm: reproducible ($(sha256sum <"$out" | cut -c1-16)) with $tools"; exit 0; fi
  if [[ "$tools" != "$(cat "$out.tools" 2>/dev/null)" ]]; then
    echo "engine.wasm: rebuilt with other tools than the committed bytes, so not comparable (not a failure):" >&2
    echo "  here:      $tools" >&2
    echo "  committed: $(cat "$out.tools" 2>/dev/null)" >&2
    exit 0
  fi
  echo "engine.wasm differs from a rebuild of runtime/wop-js/engine with the same tools ($tools): run runtime/wop-js/engine/build.sh and commit it" >&2
  exit 1
fi
cp "$built" "$out"
echo "$tools" >"$out.tools"
echo "wrote $out ($(wc -c <"$out") bytes, sha256 $(sha256sum <"$out" | cut -c1-16))"
