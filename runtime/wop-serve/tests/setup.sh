#!/usr/bin/env bash
# Creates the Python venv the MCP-client end-to-end test uses
# (tests/e2e/python.rs): the official `mcp` SDK, pinned exactly.
# Idempotent; CI calls it before `cargo test -p wop-serve`.
#   VENV defaults to <workspace>/target/wop-serve-venv (override: WOP_SERVE_VENV).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="${WOP_SERVE_VENV:-$root/target/wop-serve-venv}"
MCP_VERSION="2.3.0"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$MCP_VERSION'" 2>/dev/null; then
  echo "wop-serve: mcp==$MCP_VERSION already in $venv"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
echo "wop-serve: mcp==$MCP_VERSION installed in $venv"
