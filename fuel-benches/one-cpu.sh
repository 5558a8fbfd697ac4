# Sourced by http-cpu.sh and serve-wall.sh. Sets `pin` (the server's
# command prefix) and `cpin` (wrk's).
#
# ONE_CPU=<n>: the server and wrk both on CPU n (taskset), so the server
# never idles between a client's requests nor wakes on another CPU than
# the client's: what is left is the service's own work (decision 0040).
# SERVER_CPU=<n> CLIENT_CPU=<m>: the server on CPU n, wrk on CPU m, so
# every thread of the server stays on one core's caches while it still
# idles between a client's requests (either may be given alone).
pin=()
cpin=()
if [[ -n "${ONE_CPU:-}${SERVER_CPU:-}${CLIENT_CPU:-}" ]]; then
    command -v taskset >/dev/null || { echo "ONE_CPU, SERVER_CPU and CLIENT_CPU need taskset (util-linux)" >&2; exit 2; }
fi
if [[ -n "${ONE_CPU:-}" ]]; then
    pin=(taskset -c "$ONE_CPU")
    cpin=(taskset -c "$ONE_CPU")
fi
[[ -z "${SERVER_CPU:-}" ]] || pin=(taskset -c "$SERVER_CPU")
[[ -z "${CLIENT_CPU:-}" ]] || cpin=(taskset -c "$CLIENT_CPU")
