#!/usr/bin/env bash
# Installs the Rust toolchain that rust-toolchain.toml pins (with its
# components and the wasm targets), if it is missing. rustup does not
# install a pinned toolchain on its own where RUSTUP_AUTO_INSTALL=0 is set,
# so every entry point (.ci/run, .ci/test.sh, the README's demo command)
# calls this first. It also installs `make` (jemalloc's build runs it)
# when missing. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
if [[ -z "$channel" ]]; then
    echo "toolchain.sh: no channel in rust-toolchain.toml" >&2
    exit 1
fi
if ! rustup run "$channel" rustc --version >/dev/null 2>&1 \
    || ! rustup +"$channel" target list --installed 2>/dev/null | grep -x wasm32-wasip2 >/dev/null; then
    echo "toolchain.sh: installing Rust $channel (pinned in rust-toolchain.toml) with rustfmt, clippy and the wasm targets" >&2
    rustup toolchain install "$channel" --profile minimal -c rustfmt -c clippy \
        -t wasm32-wasip2 -t wasm32-unknown-unknown >&2
fi
echo "toolchain: $(rustup run "$channel" rustc --version)" >&2
# jemalloc (the service's allocator, decision 0040) is built from its C
# source by its crate's build script, which runs `make` (a C compiler is
# already needed to link Rust on Linux).
if ! command -v make >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
        echo "toolchain.sh: installing Debian's make (jemalloc's build needs it)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-upgrade make >&2
    else
        echo "toolchain.sh: \`make\` is missing and jemalloc's build needs it: install it (Debian: apt-get install make)" >&2
        exit 1
    fi
fi
