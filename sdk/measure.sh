#!/usr/bin/env bash
# Measure the `hello` packs of every language through the real `wop` CLI:
#
#   sdk/measure.sh <built-dir>      # the <out-dir> given to sdk/build-all.sh
#
# Per language (rust, js, python, c):
#   component       size of the component file;
#   first run       wall time of `wop run` against an empty --cache-dir
#                   (compile + write the compile cache + instantiate + run);
#   cached start    wall time of the next `wop run` with that warm cache dir;
#   hello (process) median wall time of N `wop run` with the warm cache, and
#                   its ratio to Rust's (hyperfine when installed, else a
#                   loop of N runs timed with `date +%s%N`; the output says which);
#   hello (invoke)  median of the runtime's own `usage.wallTimeUs` (instantiate
#                   + invoke, no process start) over the same runs, and its
#                   ratio to Rust's.
# The Rust `hello` is the sample pack (sample-packs/samples/hello) as the
# test-packs crate assembles it under target/*/build/wop-test-packs-*/out/packs/
# (the newest one), else built here with cargo; RUST_HELLO=<pack-dir> overrides.
# Environment: WOP=/path/to/wop (else `wop` on PATH), N (default 20),
# LANGS="js python c". Prints a table; numbers only, no thresholds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ $# -eq 1 ]] || { echo "usage: $0 <built-dir>" >&2; exit 2; }
built="$(cd "$1" && pwd)"
# shellcheck source=_common.sh
source "$here/_common.sh"
wop="$(wop_cli)"
n="${N:-20}"
langs=(${LANGS:-js python c})

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The Rust hello pack directory.
rust_hello() {
  if [[ -n "${RUST_HELLO:-}" ]]; then echo "$RUST_HELLO"; return; fi
  local d
  d="$(ls -td "$WOP_REPO_ROOT"/target/*/build/wop-test-packs-*/out/packs/hello 2>/dev/null | sed -n 1p || true)"
  if [[ -n "$d" && -f "$d/pack.json" ]]; then echo "$d"; return; fi
  echo "building the Rust hello sample (cargo, wasm32-wasip2)" >&2
  cargo build -q --release --target wasm32-wasip2 --manifest-path "$WOP_REPO_ROOT/sample-packs/Cargo.toml" \
    -p wop-sample-hello >&2
  "$wop" pack "$WOP_REPO_ROOT/sample-packs/samples/hello" \
    --wasm "$WOP_REPO_ROOT/sample-packs/target/wasm32-wasip2/release/wop_sample_hello.wasm" \
    --out "$work/rust" >/dev/null
  echo "$work/rust/hello"
}

now_ns() { date +%s%N; }
# ms <start-ns> <end-ns>
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
human_size() { awk -v b="$1" 'BEGIN { if (b >= 1e6) printf "%.1f MB", b / 1e6; else printf "%.1f KB", b / 1e3 }'; }

have_hyperfine=""
command -v hyperfine >/dev/null 2>&1 && have_hyperfine=1

# measure <label> <pack-dir> <type-id>: prints one tab-separated line
#   label bytes first-ms cached-ms process-median-ms invoke-median-us
measure() {
  local label="$1" dir="$2" type="$3" cache store bytes t0 t1 first cached proc inv i
  cache="$work/cache-$label"
  store="$work/store-$label"
  mkdir -p "$cache"
  bytes="$(stat -c %s "$dir/$(jq -r .runtime.entry "$dir/pack.json")")"
  t0="$(now_ns)"
  "$wop" run "$dir" "$type" --cache-dir "$cache" --store "$store" --run-id cold --json >"$work/out.json"
  t1="$(now_ns)"
  first="$(ms "$t0" "$t1")"
  jq -e '.outcome.outcome == "completed"' "$work/out.json" >/dev/null || wop_die "$label hello did not complete"
  t0="$(now_ns)"
  "$wop" run "$dir" "$type" --cache-dir "$cache" --store "$store" --run-id warm --json >"$work/out.json"
  t1="$(now_ns)"
  cached="$(ms "$t0" "$t1")"
  : >"$work/proc-$label"
  : >"$work/inv-$label"
  for ((i = 0; i < n; i++)); do
    t0="$(now_ns)"
    "$wop" run "$dir" "$type" --cache-dir "$cache" --store "$store" --run-id "r$i" --json >"$work/out.json"
    t1="$(now_ns)"
    ms "$t0" "$t1" >>"$work/proc-$label"
    echo >>"$work/proc-$label"
    jq -r '.usage.wallTimeUs' "$work/out.json" >>"$work/inv-$label"
  done
  if [[ -n "$have_hyperfine" ]]; then
    hyperfine -N -w 2 -r "$n" --export-json "$work/hf-$label.json" \
      "$wop run $dir $type --cache-dir $cache --store $store --run-id hf --json" >/dev/null 2>&1
    proc="$(jq -r '.results[0].median * 1000' "$work/hf-$label.json")"
  else
    proc="$(grep -v '^$' "$work/proc-$label" | median)"
  fi
  inv="$(median <"$work/inv-$label")"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$bytes" "$first" "$cached" "$proc" "$inv"
}

rust="$(rust_hello)"
{
  measure rust "$rust" wop.samples.hello
  for l in "${langs[@]}"; do
    measure "$l" "$built/$l/$l-hello" "wop.samples.$l.hello"
  done
} >"$work/results.tsv"

method="loop of N=$n \`wop run\` per language, timed with date +%s%N, median (hyperfine not installed)"
[[ -n "$have_hyperfine" ]] && method="hyperfine -N, $n runs per language, median"
echo "wop: $wop ($("$wop" --version))"
echo "machine: $(nproc) CPUs, $(uname -sr)"
echo "hello latency (process): $method; warm --cache-dir"
echo "hello latency (invoke): median usage.wallTimeUs (instantiate + invoke) over the same $n runs"
echo "rust hello: $rust"
echo
read -r _ _ _ _ rust_proc rust_inv < <(head -1 "$work/results.tsv")
printf '%-7s %10s %16s %14s %18s %7s %17s %7s\n' \
  lang component "first run (cold)" "cached start" "hello (process)" ratio "hello (invoke)" ratio
while IFS=$'\t' read -r label bytes first cached proc inv; do
  printf '%-7s %10s %13s ms %11s ms %15.1f ms %6sx %14.0f us %6sx\n' "$label" "$(human_size "$bytes")" \
    "$first" "$cached" "$proc" \
    "$(awk -v a="$proc" -v b="$rust_proc" 'BEGIN { printf "%.2f", a / b }')" \
    "$inv" "$(awk -v a="$inv" -v b="$rust_inv" 'BEGIN { printf "%.1f", a / b }')"
done <"$work/results.tsv"
