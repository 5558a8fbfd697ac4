#!/usr/bin/env bash
# Installs the pinned test servers for wop-mcp's integration tests.
# Idempotent: re-running with everything in place does nothing heavy.
#   - npm:  tests/node/node_modules (from package-lock.json, `npm ci`)
#   - PyPI: tests/python/.venv      (from requirements.txt)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

node_dir="$here/node"
stamp="$node_dir/node_modules/.wop-lock-stamp"
if [[ ! -f "$stamp" ]] || ! cmp -s "$node_dir/package-lock.json" "$stamp"; then
  (cd "$node_dir" && npm ci --no-audit --no-fund --ignore-scripts)
  cp "$node_dir/package-lock.json" "$stamp"
fi

py_dir="$here/python"
venv="$py_dir/.venv"
pystamp="$venv/.wop-req-stamp"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
if [[ ! -f "$pystamp" ]] || ! cmp -s "$py_dir/requirements.txt" "$pystamp"; then
  "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$py_dir/requirements.txt"
  cp "$py_dir/requirements.txt" "$pystamp"
fi
echo "wop-mcp test servers ready (node: $node_dir/node_modules, python: $venv)"
