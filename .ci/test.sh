#!/usr/bin/env bash
# The tests, with all their set-up, in one command (the README's):
#
#   bash .ci/test.sh [CARGO TEST ARGS...]     # e.g. bash .ci/test.sh --test e2e
#
# - a throwaway PostgreSQL on loopback (.ci/postgres.sh; installed from
#   Debian if missing), unless WOP_TEST_POSTGRES_URL already names one;
#   stopped again on exit;
# - the pinned MCP test servers (npm, PyPI) and the PyPI `mcp` client for
#   wop-serve's end-to-end tests (each setup script is idempotent);
# - Prometheus from Debian (the /metrics test scrapes with a real server),
#   if it is missing and apt-get can install it;
# - the Rust toolchain rust-toolchain.toml pins (.ci/toolchain.sh);
# - then `cargo test --workspace` with the arguments given.
#
# .ci/run calls this; so can anyone on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
# The pinned Rust toolchain (installed if missing; one line says which).
bash .ci/toolchain.sh

if [[ -z "${WOP_TEST_POSTGRES_URL:-}" ]]; then
    WOP_TEST_POSTGRES_URL="$(bash .ci/postgres.sh start)"
    export WOP_TEST_POSTGRES_URL
    trap 'bash .ci/postgres.sh stop || true' EXIT
fi
bash runtime/wop-mcp/tests/setup.sh
bash runtime/wop-serve/tests/setup.sh
if ! command -v prometheus >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
    echo "test.sh: installing Debian's prometheus" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-upgrade prometheus >&2
fi
cargo test --workspace "$@"
