#!/usr/bin/env bash
# One pack through a real `wop serve --memory-store`, from outside: at one
# keep-alive client, the round trip and the sandbox's own time
# (`usage.wallTimeUs` of every response, p50); at eight, requests/s and
# the server's CPU per request (utime + stime from /proc/<pid>/stat).
# Give several `wop` binaries to compare them in one run, paired (each
# one in turn, ROUNDS times; decision 0039).
#
#   bash fuel-benches/serve-wall.sh <pack-dir> <typeId> '<inputs JSON>' [ROUNDS] [WOP...]
#   e.g. bash fuel-benches/serve-wall.sh /tmp/langs/js/js-hello wop.samples.js.hello '{"name":"Ada"}' 2 /tmp/wop-old target/release/wop
#
# Needs wrk (Debian: apt-get install wrk). SECONDS_PER_RUN=<s> per wrk run (4).
# PERF_DATA=<file>: `perf record` the server through each eight-client run
# (the file keeps the last binary's last round; call chains by DWARF, as
# release builds keep no frame pointers: PERF_CALLGRAPH overrides), then
#   perf report -i <file> --children --sort symbol -g none --stdio
# shows where the service's CPU goes (the deferred usage flush, HTTP, the
# sandbox) in the same binary as the figures. Recording costs the server
# CPU: compare figures only between runs without it.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 3 ]] || { sed -n '2,19p' "$0" >&2; exit 2; }
pack=$(cd "$1" && pwd); type_id=$2; inputs=$3; rounds=${4:-1}
shift $(( $# >= 4 ? 4 : 3 ))
bins=("$@"); [[ ${#bins[@]} -gt 0 ]] || bins=(target/release/wop)
secs=${SECONDS_PER_RUN:-4}
command -v wrk >/dev/null || { echo "serve-wall.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }

source fuel-benches/one-cpu.sh   # ONE_CPU=<n>: server and wrk on CPU n
tmp=$(mktemp -d)
spid=""
cleanup() { [[ -n "$spid" ]] && kill "$spid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
mkdir "$tmp/packs"
ln -s "$pack" "$tmp/packs/$(basename "$pack")"
body=$(jq -cn --arg t "$type_id" --argjson i "$inputs" '{typeId: $t, inputs: $i}')
cat > "$tmp/post.lua" <<EOF
wrk.method = "POST"
wrk.body = [[$body]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"
EOF
# The same, printing each response's wallTimeUs (wrk's threads cannot
# share a table with done()).
cp "$tmp/post.lua" "$tmp/wall.lua"
cat >> "$tmp/wall.lua" <<'EOF'
function response(status, headers, body)
  io.write("W ", string.match(body, '"wallTimeUs":(%d+)') or "x", "\n")
end
EOF
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$spid/stat"; }
p50() { sort -n | awk '{a[NR]=$1} END {print (NR ? a[int(NR/2)+1] : "-")}'; }

for _ in $(seq "$rounds"); do
    for bin in "${bins[@]}"; do
        "${pin[@]}" "$bin" serve --packs "$tmp/packs" --memory-store --listen 127.0.0.1:0 --anonymous-loopback \
            > "$tmp/out" 2> "$tmp/err" &
        spid=$!
        for _ in $(seq 100); do grep -q "listening on" "$tmp/out" 2>/dev/null && break; sleep 0.1; done
        base=$(grep -o "http://[0-9.:]*" "$tmp/out" | sed -n 1p)
        [[ -n "$base" ]] || { echo "serve-wall.sh: $bin did not start:" >&2; cat "$tmp/err" >&2; exit 1; }
        url="$base/host/wop/invocations"
        "${cpin[@]}" wrk -t1 -c8 -d1s -s "$tmp/post.lua" "$url" > /dev/null   # warm-up
        one=$("${cpin[@]}" wrk -t1 -c1 -d"${secs}s" --latency -s "$tmp/wall.lua" "$url")
        perf_pid=""
        if [[ -n "${PERF_DATA:-}" ]]; then
            command -v perf >/dev/null || { echo "PERF_DATA needs perf (Debian: apt-get install linux-perf)" >&2; exit 2; }
            perf record -q -F 499 ${PERF_CALLGRAPH:---call-graph=dwarf,16384} -o "$PERF_DATA" -p "$spid" -- sleep "$secs" 2>/dev/null &
            perf_pid=$!
        fi
        t0=$(ticks)
        eight=$("${cpin[@]}" wrk -t1 -c8 -d"${secs}s" -s "$tmp/post.lua" "$url")
        t1=$(ticks)
        [[ -z "$perf_pid" ]] || wait "$perf_pid" 2>/dev/null || true
        n=$(awk '/requests in/ {print $1}' <<<"$eight")
        printf '%-28s c=1: p50 %8s  wallTimeUs p50 %5s µs  %6d req/s | c=8: %6d req/s  server CPU %4d µs/request\n' \
            "$bin" "$(awk '$1 == "50%" {print $2}' <<<"$one")" \
            "$(awk '/^W / {print $2}' <<<"$one" | p50)" \
            "$(awk '/Requests\/sec/ {printf "%d", $2}' <<<"$one")" \
            $((n / secs)) $(((t1 - t0) * 1000000 / hz / n))
        kill "$spid"; wait "$spid" 2>/dev/null || true; spid=""
    done
done
