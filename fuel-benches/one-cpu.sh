# Sourced by http-cpu.sh and serve-wall.sh. ONE_CPU=<n>: the server and wrk
# both on CPU n (taskset), so the server never idles between a client's
# requests nor wakes on another CPU than the client's: what is left is the
# service's own work (decision 0040). Sets `pin`: the command prefix.
pin=()
if [[ -n "${ONE_CPU:-}" ]]; then
    command -v taskset >/dev/null || { echo "ONE_CPU needs taskset (util-linux)" >&2; exit 2; }
    pin=(taskset -c "$ONE_CPU")
fi
