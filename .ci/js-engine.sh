#!/usr/bin/env bash
# The JavaScript engine (runtime/wop-js/engine): the committed engine.wasm
# is what its source builds (same tools, same bytes), and the prelude (the
# protocol's `ctx` and the web/Node globals) passes its Node harness
# against real registry packs (the fixture archives), their outputs equal
# to what the same nodes return under plain Node.
#
# Installs what it needs: Debian clang-19, llvm-19 (llvm-ar), wasi-libc,
# nodejs (when missing); the wasm32-wasip1 target of the pinned toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for pkg in clang-19 llvm-19 wasi-libc; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep "install ok installed" >/dev/null || need+=("$pkg")
done
command -v node >/dev/null 2>&1 || need+=(nodejs)
if [[ ${#need[@]} -gt 0 ]]; then
    echo "js-engine.sh: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-upgrade "${need[@]}" >&2
fi
bash runtime/wop-js/engine/build.sh --check
packs=$(mktemp -d)
trap 'rm -rf "$packs"' EXIT
bash runtime/wop-js/engine/js/test/unpack-fixtures.sh "$packs"
WOP_REGISTRY_PACKS="$packs" node runtime/wop-js/engine/js/test/run.mjs
WOP_REGISTRY_PACKS="$packs" node runtime/wop-js/engine/js/test/expected.mjs --check
