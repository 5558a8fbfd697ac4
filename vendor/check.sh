#!/usr/bin/env bash
# The vendored wasmtime is exactly what vendor/README.md says: the published
# 50.0.1 crate + wasmtime 51.0.0's pagemap.rs + wasmtime-50.0.1-funcref.patch
# + wasmtime-50.0.1-idle-stacks.patch.
# Needs the crates.io index (cargo downloads the two published crates).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo fetch -q
# From outside the workspace: inside it, its [patch] answers for 50.0.1
# with the vendored copy and nothing is downloaded (a fresh machine has
# no published 50.0.1 in its registry otherwise).
outside=$(mktemp -d)
for v in 50.0.1 51.0.0; do
  (cd "$outside" && { cargo info -q "wasmtime@$v" >/dev/null 2>&1 || cargo info "wasmtime@$v" >/dev/null; })
done
rmdir "$outside"
reg=""
for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
  [ -d "$d/wasmtime-50.0.1" ] && [ -d "$d/wasmtime-51.0.0" ] && reg=$d
done
[ -n "$reg" ] || { echo "vendor check: wasmtime 50.0.1 and 51.0.0 sources not in the cargo registry" >&2; exit 1; }
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
cp -r "$reg/wasmtime-50.0.1/." "$t" && rm -f "$t/.cargo-ok"
cp "$reg/wasmtime-51.0.0/src/runtime/vm/sys/unix/pagemap.rs" "$t/src/runtime/vm/sys/unix/"
(cd "$t" && git apply -p1 "$root/vendor/wasmtime-50.0.1-funcref.patch" \
  && git apply -p1 "$root/vendor/wasmtime-50.0.1-idle-stacks.patch")
if diff -r "$t" vendor/wasmtime-50.0.1 >/dev/null; then
  echo "vendor ok: wasmtime 50.0.1 + 51.0.0's pagemap.rs + the funcref and idle-stacks patches, nothing else"
else
  diff -r "$t" vendor/wasmtime-50.0.1 | sed -n 1,40p >&2
  echo "vendor check: vendor/wasmtime-50.0.1 differs from what vendor/README.md says" >&2
  exit 1
fi
