#!/usr/bin/env bash
# The soak (issue 14), short, for CI: one shared runtime under a concurrent
# mix of honest and hostile invocations, first in-process (library mode),
# then behind the real `wop serve` (serve mode). See fuel-benches/README.md
# ("Soak").
#
#   bash .ci/soak.sh [LIBRARY_SECONDS] [SERVE_SECONDS] [SOAK FLAGS...]   # default 40 20
#
# Further flags go to both runs (e.g. `--store postgres://…`, `--concurrency 8`).
#
# Dev profile on purpose: CI has already built wasmtime (and target/debug/wop)
# for the tests; a release build would compile it a second time. Exits
# non-zero if either run had an unanswered or unexpected answer, a host
# panic, RSS growth above 5 % between its quiet points (judged from 300 s), or (serve) a non-zero exit
# on SIGTERM. The last line of each run is `soak: mode=… ok|FAIL`.
set -euo pipefail
cd "$(dirname "$0")/.."

library_secs="${1:-40}"
serve_secs="${2:-20}"
extra=("${@:3}")

# Serve mode runs the `wop` binary next to the soak binary (target/debug/wop).
# After `cargo test --workspace` both exist (cargo builds the binaries of
# packages with integration tests): SOAK_USE_BUILT=1 (set by .ci/run) runs
# those. Building them here instead resolves features for two packages
# only, which differs from the workspace test build and would compile
# wasmtime again.
if [ -z "${SOAK_USE_BUILT:-}" ] || [ ! -x target/debug/soak ] || [ ! -x target/debug/wop ]; then
    cargo build -p wop-cli -p fuel-benches --bin wop --bin soak
fi

status=0
target/debug/soak --mode library --seconds "$library_secs" "${extra[@]}" || status=1
target/debug/soak --mode serve --seconds "$serve_secs" "${extra[@]}" || status=1
if [ "$status" -ne 0 ]; then
    echo "soak: FAILED (see the UNEXPECTED/UNANSWERED lines and the RSS table above)" >&2
fi
exit "$status"
