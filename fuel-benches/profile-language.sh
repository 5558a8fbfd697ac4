#!/usr/bin/env bash
# Profile one language's hello through the library (fresh instance per call),
# without the compile at load: `languages --profile` prints its pid when warm,
# and `perf record` attaches then.
#
#   bash fuel-benches/profile-language.sh <built-dir> <lang> [seconds] [perf.data]
#   perf report -i <perf.data> --no-children --sort symbol
# PERF_CALLGRAPH="--call-graph=dwarf,16384" for call chains through Rust frames.
# PROFILE_ARGS="--new-run-per-call" (or --idle-us N): passed on to `languages --profile`.
#
# <built-dir>: the out-dir of sdk/build-all.sh; <lang>: rust, c, js, python,
# registry-js or new-js; or bare-rust (the Rust hello on a bare wasmtime configured like wop). Needs `perf` and a release build of `languages`
# and `wop` (cargo build --release -p wop-cli -p fuel-benches --bin languages --bin wop).
set -euo pipefail
command -v perf >/dev/null || { echo "profile-language.sh needs perf (Debian: apt-get install linux-perf)" >&2; exit 1; }
built=${1:?built-dir}; lang=${2:?lang}; secs=${3:-10}; out=${4:-/tmp/$lang.perf.data}
root=$(cd "$(dirname "$0")/.." && pwd)
fifo=$(mktemp -u); mkfifo "$fifo"
"$root/target/release/languages" "$built" --profile "$lang" "$secs" ${PROFILE_ARGS:-} > "$fifo" &
bench=$!
while read -r line; do
  echo "$line"
  case $line in
    profiling*) perf record -q -F 1999 ${PERF_CALLGRAPH:--g} -o "$out" -p "${line#profiling }" -- sleep "$secs" 2>/dev/null & perf_pid=$! ;;
  esac
done < "$fifo"
wait "$bench"; wait "${perf_pid:-0}" 2>/dev/null || true
rm -f "$fifo"
echo "perf data: $out"
