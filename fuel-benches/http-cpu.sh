#!/usr/bin/env bash
# What one request costs a real `wop serve` (memory store): the invoke API
# running `hello` next to the cheapest exchange it has (`GET /healthz`), at
# 1 and 8 keep-alive clients driven by wrk. Prints requests/s, p50, and the
# server's own CPU per request (utime + stime from /proc/<pid>/stat over the
# run, divided by the requests served), so the HTTP floor and the
# invocation's share can be told apart on a noisy machine (decision 0024),
# and the server threads' context switches per request, involuntary ones
# (preempted, mostly by wrk on the same cores) apart.
#
#   bash fuel-benches/http-cpu.sh [SECONDS] [ROUNDS] [WOP]   # default 4 2 target/release/wop
#
# Needs wrk (Debian: apt-get install wrk). wrk runs on the same cores as the
# server: its CPU is not in the server's column but does limit the rates.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-4}"
rounds="${2:-2}"
wop="${3:-target/release/wop}"

command -v wrk >/dev/null || { echo "http-cpu.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }
[[ -x "$wop" ]] || cargo build --release -p wop-cli --bin wop
hello=$(ls -dt target/release/build/wop-test-packs-*/out/packs/hello 2>/dev/null | sed -n 1p || true)
if [[ -z "$hello" ]]; then
    cargo build --release -p wop-test-packs
    hello=$(ls -dt target/release/build/wop-test-packs-*/out/packs/hello | sed -n 1p)
fi

source fuel-benches/one-cpu.sh   # ONE_CPU=<n>: server and wrk on CPU n
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
mkdir "$tmp/packs"
ln -s "$PWD/$hello" "$tmp/packs/hello"
cat > "$tmp/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"typeId":"wop.samples.hello","inputs":{"name":"Ada"}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"
EOF
echo 'wrk.method = "GET"' > "$tmp/get.lua"

"${pin[@]}" "$wop" serve --packs "$tmp/packs" --memory-store --listen 127.0.0.1:0 --anonymous-loopback \
    > "$tmp/out" 2> "$tmp/err" &
pid=$!
for _ in $(seq 100); do
    grep -q "listening on" "$tmp/out" 2>/dev/null && break
    sleep 0.1
done
base=$(grep -o "http://[0-9.:]*" "$tmp/out" | sed -n 1p)
[[ -n "$base" ]] || { echo "http-cpu.sh: wop serve did not start:" >&2; cat "$tmp/err" >&2; exit 1; }

ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# voluntary and involuntary context switches of all the server's threads
switches() { cat /proc/"$pid"/task/*/status | awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v, n}'; }
hz=$(getconf CLK_TCK)
# one LABEL PATH LUA CLIENTS: one wrk run, one output line.
one() {
    local t0 t1 s0 s1 out n p50
    t0=$(ticks); s0=$(switches)
    out=$("${cpin[@]}" wrk -t1 -c"$4" -d"${secs}s" --latency -s "$3" "$base$2")
    t1=$(ticks); s1=$(switches)
    n=$(awk '/requests in/ {print $1}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    printf '%-8s c=%-2s %8d req/s  p50 %9s  server CPU %5d µs/request  switches %s\n' \
        "$1" "$4" $((n / secs)) "$p50" $(((t1 - t0) * 1000000 / hz / n)) \
        "$(awk -v n="$n" '{split($0, b, " ")} NR == 1 {v = $1; i = $2} NR == 2 {printf "%.2f/request (%.2f involuntary)", ($1 - v + $2 - i) / n, ($2 - i) / n}' <<<"$s0"$'\n'"$s1")"
}
"${cpin[@]}" wrk -t1 -c8 -d1s -s "$tmp/post.lua" "$base/host/wop/invocations" > /dev/null   # warm-up
for _ in $(seq "$rounds"); do
    for c in 1 8; do
        one healthz /healthz "$tmp/get.lua" "$c"
        one invoke /host/wop/invocations "$tmp/post.lua" "$c"
    done
done
