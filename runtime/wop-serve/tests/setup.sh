#!/usr/bin/env bash
# Installs what wop-serve's end-to-end tests drive the service with, pinned:
#   - the official Python MCP SDK (`mcp`) in a venv (tests/e2e/python.rs);
#     VENV defaults to <workspace>/target/wop-serve-venv (WOP_SERVE_VENV);
#   - playwright-core from npm (tests/browser, package-lock.json) and, when
#     missing and this is root with apt-get, Debian's chromium: the console
#     test (tests/e2e/console.rs) drives the page in headless Chromium.
# Idempotent; .ci/test.sh calls it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="${WOP_SERVE_VENV:-$root/target/wop-serve-venv}"
MCP_VERSION="2.3.0"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$MCP_VERSION'" 2>/dev/null; then
  echo "wop-serve: mcp==$MCP_VERSION already in $venv"
else
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
  echo "wop-serve: mcp==$MCP_VERSION installed in $venv"
fi

browser="$here/browser"
stamp="$browser/node_modules/.wop-lock-stamp"
if [[ ! -f "$stamp" ]] || ! cmp -s "$browser/package-lock.json" "$stamp"; then
  (cd "$browser" && npm ci --no-audit --no-fund --ignore-scripts)
  cp "$browser/package-lock.json" "$stamp"
fi
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
  echo "wop-serve: installing Debian's chromium for the console test" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-upgrade chromium >&2
fi
echo "wop-serve: browser test ready ($(command -v chromium || echo 'no chromium'))"
