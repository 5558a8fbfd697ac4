#!/usr/bin/env python3
"""Where one path's CPU per call goes that another's does not.

    python3 fuel-benches/profile-diff.py A.perf.data A_US B.perf.data B_US [--inclusive] [--top N]

A and B are `perf record` files of two loops over the same work (made by
`profile-language.sh`, e.g. `rust` and `bare-rust`: wop's library path and
a bare wasmtime configured like wop, from the same binary), and A_US/B_US
their process CPU per call as `languages --profile` printed it. Each
symbol's share of its profile's samples is turned into microseconds per
call, and the symbols are listed by the difference A - B, largest first:
what A spends per call that B does not (or the reverse, negative).

Self time by default (the sampled frame); `--inclusive` charges every
frame on the stack, which shows whole subsystems (the gate, the meter) at
the cost of double counting. Inlining differs between the two paths, so
read a frame that exists only in one (an async block that inlined the
instantiation) together with its counterpart in the other.
Needs perf (for `perf script`); record with PERF_CALLGRAPH="--call-graph=dwarf,32768".
"""
import collections
import re
import subprocess
import sys

# The two paths' store data types, so their wasmtime frames line up.
STATE = re.compile(r"<wop_runtime::component::state::HostState>|<fuel_benches::bare::Bare>")


def frames(line):
    parts = line.strip().split(None, 1)
    name = parts[1] if len(parts) > 1 else line.strip()
    name = re.sub(r"\+0x[0-9a-f]+ \(.*\)$", "", name)
    name = re.sub(r" \(.*\)$", "", name)
    return STATE.sub("<S>", name)[:120]


def load(path, inclusive):
    out = subprocess.run(
        ["perf", "script", "-i", path], capture_output=True, text=True, check=True
    ).stdout
    counts, samples = collections.Counter(), 0
    for event in out.split("\n\n"):
        lines = event.strip().split("\n")
        if len(lines) < 2:
            continue
        stack = [frames(l) for l in lines[1:]]
        samples += 1
        if inclusive:
            counts.update(set(stack))
        else:
            counts[stack[0]] += 1
    if samples == 0:
        sys.exit(f"profile-diff: no samples with call chains in {path}")
    return counts, samples


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    inclusive = "--inclusive" in argv
    top = 40
    if "--top" in argv:
        top = int(argv[argv.index("--top") + 1])
        args.remove(str(top))
    if len(args) != 4:
        sys.exit(__doc__)
    a, a_us, b, b_us = args[0], float(args[1]), args[2], float(args[3])
    ca, na = load(a, inclusive)
    cb, nb = load(b, inclusive)
    rows = []
    for sym in set(ca) | set(cb):
        x, y = ca[sym] / na * a_us, cb[sym] / nb * b_us
        rows.append((x - y, x, y, sym))
    rows.sort(key=lambda r: -abs(r[0]))
    print(f"CPU per call: A {a_us:.2f} µs, B {b_us:.2f} µs, A - B {a_us - b_us:+.2f} µs")
    print(f"{'A - B':>8} {'A':>7} {'B':>7}  µs per call, {'inclusive' if inclusive else 'self'}")
    for d, x, y, sym in rows[:top]:
        print(f"{d:+8.3f} {x:7.3f} {y:7.3f}  {sym}")


if __name__ == "__main__":
    main(sys.argv[1:])
