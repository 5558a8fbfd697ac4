#!/usr/bin/env bash
# Fuzzes the untrusted-input parsers of wop-core (issue 14; see fuzz/README.md).
#
#   bash .ci/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Installs the pinned nightly and cargo-fuzz if missing, builds every target
# once, then runs each for SECONDS_PER_TARGET (default 20) on a scratch copy
# of its checked-in seed corpus (fuzz/corpus/<target>) plus its regression
# inputs (fuzz/regressions/<target>, every one executed first). Exits
# non-zero if any target crashes; the input is kept in fuzz/artifacts/<target>/.
#
# The ABI v1 loader is fuzzed with generated modules by the stable test
# suite instead (runtime/wop-runtime/tests/all/generated_modules.rs).
set -euo pipefail

NIGHTLY=nightly-2026-10-30
CARGO_FUZZ_VERSION=0.13.2

secs="${1:-20}"
shift || true
cd "$(dirname "$0")/../fuzz"

if ! rustup run "$NIGHTLY" rustc --version >/dev/null 2>&1; then
    rustup toolchain install "$NIGHTLY" --profile minimal
fi
if ! cargo fuzz --version 2>/dev/null | grep -x "cargo-fuzz $CARGO_FUZZ_VERSION" >/dev/null; then
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi
fuzz() { cargo "+$NIGHTLY" fuzz "$@"; }

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(fuzz list)
fi

# Pure Rust (unsafe_code denied in wop-core): no sanitizer, so every
# second goes to executions. Debug assertions and overflow checks stay on.
fuzz build --sanitizer none 2>&1 | tail -n 3

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=()
summary=()
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t"
    cp -R "corpus/$t/." "$scratch/$t/"
    dirs=("$scratch/$t")
    if [ -d "regressions/$t" ]; then
        dirs+=("regressions/$t")
    fi
    echo "== $t: ${secs}s"
    log="$scratch/$t.log"
    # -timeout: one input running 10 s is a hang (a crash);
    # -rss_limit_mb: growing past 2 GiB is a crash too.
    if fuzz run --sanitizer none "$t" "${dirs[@]}" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1; then
        verdict=ok
    else
        verdict=CRASH
        failed+=("$t")
        grep -E -A12 "panicked at|ERROR: libFuzzer|Test unit written" "$log" | sed -n 1,40p ||
            tail -n 20 "$log"
    fi
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)" || true
    cov="$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 | tr -dc 0-9)" || true
    summary+=("$(printf '%-12s %6ss %12s execs  cov %6s  %s' "$t" "$secs" "${execs:-?}" "${cov:-?}" "$verdict")")
done

echo
echo "fuzz summary"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "crashed: ${failed[*]} (inputs in fuzz/artifacts/<target>/; reproduce with"
    echo "  cargo +$NIGHTLY fuzz run --sanitizer none <target> fuzz/artifacts/<target>/<file>)"
    exit 1
fi
