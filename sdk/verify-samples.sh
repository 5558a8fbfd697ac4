#!/usr/bin/env bash
# Run the JavaScript, Python and C sample packs built by sdk/build-all.sh
# through the real `wop` CLI and check their behaviour:
#
#   sdk/verify-samples.sh <built-dir>      # the <out-dir> given to build-all.sh
#
# The same behavioural table for every language:
#   - hello greets and logs; a bad input is a validation_error;
#   - tool-call reaches a granted loopback HTTP tool and lists its tools; a
#     tool the pack was not granted gives `forbidden` and never reaches the
#     server (the test server records every request it receives); a granted
#     write-tier tool called by the same node twice (attempt 1, then attempt 2
#     against the same effect store) fires once and the retry's output is the
#     replayed first one;
#   - fetch reads a loopback test server (allowLoopback, test-only) and gets
#     `egress_denied` for the cloud-metadata address 169.254.169.254;
#   - runaway (a test pack) is stopped by the fuel limit when it spins
#     (`sandbox_timeout`, cause fuel) and by the memory limit when it keeps
#     allocating (`sandbox_memory_exceeded`);
#   - `wop new <lang>` scaffolds a pack that its build.sh builds and that runs
#     (with output at import time added to it);
#   - Python author mistakes (no `invoke`, a third-party module that is not
#     next to pack.py) fail the build with the SDK's own message.
# Starts a local HTTP server on 127.0.0.1 for the tools and the fetch target,
# and stops it on exit. Installs nothing.
# Prints "N passed, N failed"; exits non-zero on any failure.
# Environment: WOP=/path/to/wop (else `wop` on PATH); LANGS="js python c";
# NEW_LANGS (the `wop new` languages, default "rust $LANGS"; rust needs cargo
# with the wasm32-wasip2 target and is skipped, saying so, without them).
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

# A loopback HTTP server: POST answers {"echo": <the JSON body>}; GET
# anything answers a small JSON document. It writes its port to a file and
# appends "<METHOD> <path>" for every request it receives to another one
# (written before the answer is sent).
cat >"$work/server.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

def record(method, path):
    with open(sys.argv[2], "a") as f:
        f.write(f"{method} {path}\n")

class H(BaseHTTPRequestHandler):
    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_POST(self):
        record("POST", self.path)
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b"null"
        self._send(200, {"echo": json.loads(raw or b"null"), "idempotencyKey": self.headers.get("idempotency-key")})
    def do_GET(self):
        record("GET", self.path)
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
: >"$work/requests.log"
python3 "$work/server.py" "$work/port" "$work/requests.log" &
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
  echo "[[tools]]"
  echo "id = \"demo:create\""
  echo "url = \"http://127.0.0.1:$port/create\""
  echo "safetyTier = \"write\"   # performed once per node, replayed on a retry"
  echo
  echo "[egress]"
  echo "allowLoopback = true   # TEST-ONLY: the fetch samples read the local server"
  for l in "${langs[@]}"; do
    echo
    echo "[packs.$l-tool-call]"
    echo "capabilities = [\"tools\"]"
    echo "tools = [\"demo:echo\", \"demo:create\"]   # demo:admin exists but is not granted"
    echo
    echo "[packs.$l-fetch]"
    echo "capabilities = [\"http\"]"
    echo "egress = [\"http://*\", \"http://*:*\"]"
  done
} >"$work/policy.toml"

# A second policy for the runaway test packs: modest limits. 32 MiB is well
# above what hello needs in every language (peak ~13 MiB for Python, ~1.5 MiB
# for JavaScript, ~128 KiB for C); 100M fuel is ~250x what hello uses in
# Python (the most).
{
  echo "[limits]"
  echo "fuel = 100000000"
  echo "memoryBytes = 33554432"
} >"$work/limits.toml"

passed=0
failed=0
pass() {
  passed=$((passed + 1))
  echo "ok    $1"
}
fail() { # fail <name> [file...]: the files are shown on stderr
  local name="$1" f
  shift
  failed=$((failed + 1))
  echo "FAIL  $name"
  for f in "$@"; do [[ -f "$f" ]] && head -c 2000 "$f" >&2; done
  echo >&2
}
# expect <name> <jq-condition> <doc>: test a JSON document already written.
expect() {
  if jq -e "$2" "$3" >/dev/null 2>&1; then pass "$1"; else fail "$1" "$3" "$work/err.txt"; fi
}
# run_in <store> <policy> <doc> <wop run args...>: run with --json into <doc>.
run_in() {
  local store="$1" policy="$2" doc="$3"
  shift 3
  "$wop" run "$@" --json --store "$store" --policy "$policy" >"$doc" 2>"$work/err.txt" || true
}
# check <name> <jq-condition> <wop run args...>: run with --json against a
# fresh effect store and the main policy, test the document.
check() {
  local name="$1" cond="$2"
  shift 2
  run_in "$(mktemp -d "$work/store.XXXX")" "$work/policy.toml" "$work/out.json" "$@"
  expect "$name" "$cond" "$work/out.json"
}
# requests <pattern>: how many requests the test server got matching an
# extended regex ("<METHOD> <path>").
requests() { grep -Ec "$1" "$work/requests.log" || true; }

for l in "${langs[@]}"; do
  hello="$built/$l/$l-hello"
  tc="$built/$l/$l-tool-call"
  fe="$built/$l/$l-fetch"
  ra="$built/$l/$l-runaway"
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
  echo_before="$(requests '^POST /echo$')"
  admin_before="$(requests ' /admin')"
  check "$l tool-call denied tool -> forbidden" '.outcome.error.code == "forbidden"' \
    "$tc" "wop.samples.$l.tool-call" --input '{"tool":"demo:admin","arguments":{}}'
  if [[ "$(requests ' /admin')" -eq 0 && "$admin_before" -eq 0 ]]; then
    pass "$l tool-call denied tool never reached the server"
  else
    fail "$l tool-call denied tool never reached the server" "$work/requests.log"
  fi
  check "$l tool-call list" '.outcome.output.tools | map(.toolId) | sort == ["demo:create", "demo:echo"]' \
    "$tc" "wop.samples.$l.tool-call" --input '{"list":true}'
  check "$l tool-call repeat" '.outcome.output.results | length == 2' \
    "$tc" "wop.samples.$l.tool-call" --input '{"tool":"demo:echo","arguments":{"n":1},"repeat":2}'
  if [[ "$(requests '^POST /echo$')" -eq $((echo_before + 2)) ]]; then
    pass "$l tool-call repeat reached the server twice"
  else
    fail "$l tool-call repeat reached the server twice" "$work/requests.log"
  fi

  # A write-tier tool across a retry of the same node: attempt 1, then
  # attempt 2 of the same run and node against the same effect store.
  store="$(mktemp -d "$work/store.XXXX")"
  create_before="$(requests '^POST /create$')"
  for attempt in 1 2; do
    run_in "$store" "$work/policy.toml" "$work/retry-$attempt.json" \
      "$tc" "wop.samples.$l.tool-call" --run-id "retry-$l" --node-id create --attempt "$attempt" \
      --input "{\"tool\":\"demo:create\",\"arguments\":{\"lang\":\"$l\"}}"
  done
  expect "$l write tool attempt 1 performed" \
    '.outcome.outcome == "completed" and .outcome.output.result.echo.lang != null
     and ([.events[] | select(.type == "agent.tool-returned" and .replayed != true)] | length == 1)' \
    "$work/retry-1.json"
  expect "$l write tool attempt 2 replayed" \
    '.outcome.outcome == "completed"
     and ([.events[] | select(.type == "agent.tool-returned" and .replayed == true)] | length == 1)' \
    "$work/retry-2.json"
  if jq -e --slurpfile a "$work/retry-1.json" '.outcome == $a[0].outcome' "$work/retry-2.json" >/dev/null; then
    pass "$l write tool retry output equals the first"
  else
    fail "$l write tool retry output equals the first" "$work/retry-1.json" "$work/retry-2.json"
  fi
  if [[ "$(requests '^POST /create$')" -eq $((create_before + 1)) ]]; then
    pass "$l write tool fired once across the retry"
  else
    fail "$l write tool fired once across the retry" "$work/requests.log"
  fi

  check "$l fetch loopback test server" \
    '.outcome.outcome == "completed" and .outcome.output.status == 200 and .outcome.output.headers["content-type"] == "application/json" and (.outcome.output.body | fromjson | .path) == "/x"' \
    "$fe" "wop.samples.$l.fetch" --input "{\"url\":\"http://127.0.0.1:$port/x\",\"showBody\":true}"
  check "$l fetch metadata address -> egress_denied" \
    '.outcome.error.code == "egress_denied" and .outcome.error.details.reason == "ssrf-blocked"' \
    "$fe" "wop.samples.$l.fetch" --input '{"url":"http://169.254.169.254/"}'

  # Runaways: they start (their log line is there) and a limit stops them.
  run_in "$(mktemp -d "$work/store.XXXX")" "$work/limits.toml" "$work/out.json" \
    "$ra" "wop.samples.$l.runaway" --input '{"mode":"spin"}'
  expect "$l runaway spin -> sandbox_timeout (fuel)" \
    '.outcome.error.code == "sandbox_timeout" and .outcome.error.details.cause == "fuel"
     and .usage.fuelConsumed == 100000000
     and ([.events[] | select(.type == "log.appended")] | length == 1)' \
    "$work/out.json"
  run_in "$(mktemp -d "$work/store.XXXX")" "$work/limits.toml" "$work/out.json" \
    "$ra" "wop.samples.$l.runaway" --input '{"mode":"alloc"}'
  expect "$l runaway alloc -> sandbox_memory_exceeded" \
    '.outcome.error.code == "sandbox_memory_exceeded" and .outcome.error.details.limit == 33554432
     and .outcome.error.details.observed > 33554432
     and ([.events[] | select(.type == "log.appended")] | length == 1)' \
    "$work/out.json"
done

# `wop new <lang>`: scaffold, build with the scaffold's build.sh (the
# language's sdk/<lang>/build.sh, or cargo + wop pack for Rust), run hello;
# a JavaScript scaffold (the protocol's format) runs as written.
new_langs=(${NEW_LANGS:-rust ${langs[*]}})
for l in "${new_langs[@]}"; do
  name="verify-new-$l"
  if [[ "$l" == rust ]] && ! { command -v cargo >/dev/null && rustup target list --installed 2>/dev/null | grep -x wasm32-wasip2 >/dev/null; }; then
    echo "SKIPPED  rust wop new (needs cargo and the wasm32-wasip2 target)"
    continue
  fi
  mkdir -p "$work/new"
  if ! "$wop" new "$l" "$name" --dir "$work/new" --repo "$WOP_REPO_ROOT" >"$work/new-$l.log" 2>&1; then
    fail "$l wop new scaffolds" "$work/new-$l.log"
    continue
  fi
  pass "$l wop new scaffolds"
  # Output at import time (module top level runs once, at build time) must
  # neither break the build nor the pack.
  case "$l" in
    python) sed -i '1i print("imported at build time")' "$work/new/$name/pack.py" ;;
  esac
  # JavaScript: the protocol's format, no build step — wop builds it.
  if [[ "$l" == js ]]; then
    check "js wop new hello runs (no build step)" \
      '.outcome.outcome == "completed" and .outcome.output.greeting == "Hello, Ada!" and .usage.pack == "'"$name"'"' \
      "$work/new/$name" "$name.hello" --input '{"name":"Ada"}'
    continue
  fi
  # Rust: a target dir under the repository's, so dependencies build once.
  if WOP="$wop" CARGO_TARGET_DIR="$WOP_REPO_ROOT/target/wop-new" \
    "$work/new/$name/build.sh" "$work/new-out" >>"$work/new-$l.log" 2>&1; then
    pass "$l wop new builds with its build.sh"
  else
    fail "$l wop new builds with its build.sh" "$work/new-$l.log"
    continue
  fi
  check "$l wop new hello runs" \
    '.outcome.outcome == "completed" and .outcome.output.greeting == "Hello, Ada!" and .usage.pack == "'"$name"'"' \
    "$work/new-out/$name" "$name.hello" --input '{"name":"Ada"}'
done

# Author mistakes get the SDK's own messages (issue 23).
# build_refused <name> <pattern>: building $src fails, saying <pattern>.
build_refused() {
  local log="$work/mistake-$((passed + failed)).log"
  if "$here/python/build.sh" "$src" "$work/mistakes-out" >"$log" 2>&1; then
    fail "$1" "$log"
  elif grep -q "$2" "$log"; then
    pass "$1"
  else
    fail "$1" "$log"
  fi
}
for l in "${langs[@]}"; do
  [[ "$l" == python ]] || continue
  src="$work/mistakes-py"
  rm -rf "$src"
  mkdir -p "$src"
  cp "$WOP_REPO_ROOT/sample-packs/python/hello/pack.json" "$src/"
  # No invoke: refused before the long build, saying what to write.
  printf 'def invokes(ctx, request):\n    return {}\n' >"$src/pack.py"
  build_refused "python pack.py without invoke is refused" "must define invoke(ctx, request)"
  # A third-party module not next to pack.py (pip is in every
  # site-packages, never in the component's stdlib) is not bundled from
  # the machine: the build fails naming it.
  printf 'import pip\n\ndef invoke(ctx, request):\n    return {}\n' >"$src/pack.py"
  build_refused "python: an undeclared third-party import fails the build" "No module named 'pip'"
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
