#!/usr/bin/env bash
# Run the JavaScript, Python and C sample packs built by sdk/build-all.sh
# through the real `wop` CLI and check their behaviour:
#
#   sdk/verify-samples.sh <built-dir>      # the <out-dir> given to build-all.sh
#
# Per language: hello greets and logs; a bad input is a validation_error;
# tool-call reaches a granted loopback HTTP tool, gets `forbidden` for a tool
# the pack was not granted, lists its tools; fetch reads a loopback test server
# (allowLoopback, test-only) and gets `egress_denied` for the cloud-metadata
# address 169.254.169.254. Starts a local HTTP server on 127.0.0.1 for the
# tool and the fetch target, and stops it on exit. Installs nothing.
# Prints "N passed, N failed"; exits non-zero on any failure.
# Environment: WOP=/path/to/wop (else `wop` on PATH); LANGS="js python c".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ $# -eq 1 ]] || { echo "usage: $0 <built-dir>" >&2; exit 2; }
built="$(cd "$1" && pwd)"
# shellcheck source=_common.sh
source "$here/_common.sh"
wop="$(wop_cli)"
command -v python3 >/dev/null || wop_die "python3 is required for the local test server"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A loopback HTTP server: POST /echo answers {"echo": <the JSON body>};
# GET anything answers a small JSON document. It writes its port to a file.
cat >"$work/server.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b"null"
        self._send(200, {"echo": json.loads(raw or b"null"), "idempotencyKey": self.headers.get("idempotency-key")})
    def do_GET(self):
        self._send(200, {"hello": "from the test server", "path": self.path})
    def log_message(self, *a):
        pass

srv = HTTPServer(("127.0.0.1", 0), H)
with open(sys.argv[1], "w") as f:
    f.write(str(srv.server_address[1]))
srv.timeout = 1
import time
deadline = time.time() + 900   # stops by itself after 15 minutes
while time.time() < deadline:
    srv.handle_request()
PY
python3 "$work/server.py" "$work/port" &
server_pid=$!
for _ in $(seq 50); do [[ -s "$work/port" ]] && break; sleep 0.1; done
port="$(cat "$work/port")"

langs=(${LANGS:-js python c})
{
  echo "[[tools]]"
  echo "id = \"demo:echo\""
  echo "url = \"http://127.0.0.1:$port/echo\""
  echo "safetyTier = \"read\""
  echo
  echo "[[tools]]"
  echo "id = \"demo:admin\""
  echo "url = \"http://127.0.0.1:$port/admin\""
  echo "safetyTier = \"write\""
  echo
  echo "[egress]"
  echo "allowLoopback = true   # TEST-ONLY: the fetch samples read the local server"
  for l in "${langs[@]}"; do
    echo
    echo "[packs.$l-tool-call]"
    echo "capabilities = [\"tools\"]"
    echo "tools = [\"demo:echo\"]   # demo:admin exists but is not granted"
    echo
    echo "[packs.$l-fetch]"
    echo "capabilities = [\"http\"]"
    echo "egress = [\"http://*\", \"http://*:*\"]"
  done
} >"$work/policy.toml"

passed=0
failed=0
# check <name> <jq-condition> <wop run args...>: run with --json, test the document.
check() {
  local name="$1" cond="$2"
  shift 2
  local store
  store="$(mktemp -d "$work/store.XXXX")"
  local doc="$work/out.json"
  "$wop" run "$@" --json --store "$store" --policy "$work/policy.toml" >"$doc" 2>"$work/err.txt" || true
  if jq -e "$cond" "$doc" >/dev/null 2>&1; then
    passed=$((passed + 1))
    echo "ok    $name"
  else
    failed=$((failed + 1))
    echo "FAIL  $name"
    head -c 2000 "$doc" >&2
    head -c 2000 "$work/err.txt" >&2
    echo >&2
  fi
}

for l in "${langs[@]}"; do
  hello="$built/$l/$l-hello"
  tc="$built/$l/$l-tool-call"
  fe="$built/$l/$l-fetch"
  check "$l hello greets" '.outcome.outcome == "completed" and .outcome.output.greeting == "Hello, Ada!"' \
    "$hello" "wop.samples.$l.hello" --input '{"name":"Ada"}'
  check "$l hello default + log event" \
    '.outcome.output.greeting == "Hello, world!" and ([.events[] | select(.type == "log.appended")] | length == 1)' \
    "$hello" "wop.samples.$l.hello" --input '{}'
  check "$l hello bad input -> validation_error" '.outcome.error.code == "validation_error"' \
    "$hello" "wop.samples.$l.hello" --input '{"name":42}'
  check "$l tool-call granted tool" \
    '.outcome.outcome == "completed" and .outcome.output.tool == "demo:echo" and .outcome.output.result.echo.text == "hi"' \
    "$tc" "wop.samples.$l.tool-call" --input '{"tool":"demo:echo","arguments":{"text":"hi"}}'
  check "$l tool-call denied tool -> forbidden" '.outcome.error.code == "forbidden"' \
    "$tc" "wop.samples.$l.tool-call" --input '{"tool":"demo:admin","arguments":{}}'
  check "$l tool-call list" '.outcome.output.tools | map(.toolId) == ["demo:echo"]' \
    "$tc" "wop.samples.$l.tool-call" --input '{"list":true}'
  check "$l tool-call repeat" '.outcome.output.results | length == 2' \
    "$tc" "wop.samples.$l.tool-call" --input '{"tool":"demo:echo","arguments":{"n":1},"repeat":2}'
  check "$l fetch loopback test server" \
    '.outcome.outcome == "completed" and .outcome.output.status == 200 and .outcome.output.headers["content-type"] == "application/json" and (.outcome.output.body | fromjson | .path) == "/x"' \
    "$fe" "wop.samples.$l.fetch" --input "{\"url\":\"http://127.0.0.1:$port/x\",\"showBody\":true}"
  check "$l fetch metadata address -> egress_denied" \
    '.outcome.error.code == "egress_denied" and .outcome.error.details.reason == "ssrf-blocked"' \
    "$fe" "wop.samples.$l.fetch" --input '{"url":"http://169.254.169.254/"}'
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
