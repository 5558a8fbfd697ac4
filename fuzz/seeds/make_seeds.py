#!/usr/bin/env python3
"""Regenerates the checked-in seed corpora (fuzz/corpus/<target>/) from real
inputs in the repository: the sample packs' pack.json files, the TOML
policies in the docs, and the hostile URLs, hosts and names of the unit
test tables. Run from the repository root: python3 fuzz/seeds/make_seeds.py
"""
import glob, hashlib, json, os, re

ROOT = os.getcwd()
OUT = os.path.join(ROOT, "fuzz", "corpus")


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(p):
    with open(p, encoding="utf-8") as f:
        return f.read()


def unescape(s):
    try:
        return bytes(s, "utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
    except UnicodeError:
        return s


def quoted(text):
    """The contents of "…" string literals (simple ones) in Rust source."""
    return [unescape(s) if "\\" in s else s for s in re.findall(r'"((?:[^"\\\n]|\\.)*)"', text)]


manifests = [p for p in glob.glob("**/pack.json", recursive=True)
             if "target" not in p.split("/") and not p.startswith("fuzz/")]
for p in sorted(manifests):
    raw = read(p)
    put("manifest", raw)
    put("jcs", raw)
    put("trust", b"\x02" + raw.encode() + b"\x00" + raw.encode())
    put("trust", b"\x03" + raw.encode() + b"\x00" + json.dumps(
        {"algorithm": "ed25519", "keyId": "k1", "signature": "AAAA"}).encode())

# Policies: ```toml blocks in the docs and //! doc examples of wop-core.
docs = glob.glob("*.md") + glob.glob("docs/**/*.md", recursive=True) + \
    glob.glob("runtime/*/README.md") + glob.glob("sample-packs/**/README.md", recursive=True)
for p in docs:
    for block in re.findall(r"```toml\n(.*?)```", read(p), re.S):
        put("policy", block)
for p in glob.glob("runtime/wop-core/src/**/*.rs", recursive=True):
    text = read(p)
    for block in re.findall(r"//! ```toml\n((?://!.*\n)*?)//! ```", text):
        put("policy", re.sub(r"^//! ?", "", block, flags=re.M))
    # Inline policies of the unit tests: Policy::from_toml("…")
    for s in re.findall(r'from_toml\(\s*r#?"(.*?)"#?\s*,?\s*\)', text, re.S):
        put("policy", s)

# Inline policies of the integration tests (string literals with sections).
for p in glob.glob("runtime/*/tests/**/*.rs", recursive=True):
    for lit in re.findall(r'r#"(.*?)"#', read(p), re.S) + quoted(read(p)):
        text = lit.replace("\\n", "\n") if "\\n" in lit else lit
        if re.search(r"^\[(limits|packs|egress|effects|trust|mcp|runs|prices|metering)", text, re.M) or \
                text.startswith("[[tools]]"):
            put("policy", text)

# URLs and hosts of the egress case tables.
egress_src = read("runtime/wop-core/src/egress/tests.rs") + read("runtime/wop-core/src/egress/allow.rs") + \
    read("runtime/wop-core/src/egress/host.rs") + read("runtime/wop-core/src/egress/addr.rs")
strings = set(quoted(egress_src))
urls = sorted(s for s in strings if "://" in s or s.startswith(("data:", "not a url")))
for u in urls:
    put("egress_url", u)
    put("egress_url", u + "\nrapi.example.com\ngapi.example.com\nmPOST\nhaccept:application/json\na93.184.216.34")
    put("egress_url", u + "\nS\nL\na127.0.0.1\na::1")
for s in sorted(strings):
    if s and len(s) < 100:
        put("egress_host", s)
for ip in ["::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
           "fd00:ec2::254", "[::1]", "0x7f.1", "ｅｘａｍｐｌｅ.ｃｏｍ", "xn--nxasmq6b.com", "a.b.c.d.e", "1.2.3.4."]:
    put("egress_host", ip)
put("egress_host", bytes(range(16)))
put("egress_host", bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 169, 254]))

# JSON for JCS: the RFC 8785 examples and the unit-test values.
for s in quoted(read("runtime/wop-core/src/jcs.rs")):
    try:
        json.loads(s)
        put("jcs", s)
    except Exception:
        pass
for s in ['{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]}',
          '{"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/"}',
          '{"literals":[null,true,false]}', '{"\\u20ac":1,"\\ud83d\\ude00":2,"a":3,"\\u00e9":4}',
          '[9007199254740993,-0,1e21,1e-7,5e-324,1.7976931348623157e308]',
          '{"apiKey":"s","nested":{"X-Api-Key":1,"tokens":[{"password":2}]}}']:
    put("jcs", s)

# Pack returns: flags, cap index, payload.
envelopes = [
    {"outcome": "completed", "output": {"greeting": "hi"}},
    {"outcome": "suspended", "interrupt": {"question": "ok?"}},
    {"outcome": "failed", "error": {"code": "my_error", "message": "m", "details": {"x": 1}}},
    {"outcome": "failed", "error": {"code": "sandbox_timeout", "message": "fake"}},
    {"outcome": "failed", "error": {"code": "budget_exhausted", "message": "relayed"}},
    {"outcome": "failed", "error": {"code": "Bad Code", "details": [1]}},
    {"outcome": "completed"},
    {"outcome": "other"},
]
for e in envelopes:
    body = json.dumps(e).encode()
    for flags in (3, 7, 15):
        put("pack_return", bytes([flags, 3]) + body)
    put("pack_return", bytes([3, 1]) + body)
put("pack_return", bytes([0, 3]) + b'{"a":1}\xfehello\nworld\n\xfe' + b"x" * 40 + b"\n")
put("pack_return", bytes([1, 4]) + b'{"q":1}')
put("pack_return", bytes([2, 3]) + b"my_error\x00a message\x00{\"x\":1}")
put("pack_return", bytes([2, 3]) + b"sandbox_timeout\x00m\x00[1]")
put("pack_return", bytes([0x13, 2]) + b"\xff\xff\xfe\n\r\n" * 20)

# Names: import names, pack names, paths, tool ids, server ids, codes.
names = []
for p in ["runtime/wop-core/src/capability.rs", "runtime/wop-core/src/manifest.rs",
          "runtime/wop-core/src/authz.rs", "runtime/wop-core/src/policy/mcp.rs",
          "runtime/wop-core/src/tools.rs", "runtime/wop-core/src/outcome.rs"]:
    names += [s for s in quoted(read(p)) if s and len(s) < 120 and "{" not in s]
names = sorted(set(names))
for i in range(0, len(names), 8):
    put("names", "\n".join(names[i:i + 8]))
put("names", "\x3f" + "\n".join(["openwop:node-pack/http@0.1.0", "http*", "http:api.example.com",
                                   "wasi:sockets/tcp@0.2.0", "../etc/passwd", "a\\..\\b", "crm:*"]))
put("names", json.dumps({"toolId": "crm:lookup", "source": "connector", "safetyTier": "read",
                         "inputSchema": {"type": "object"}}))
put("names", json.dumps({"toolId": "x:y", "source": "mcp", "safetyTier": "exec"}))

# Invocation requests with budgets, bounds, ledgers and scaled-fuel requests.
reqs = [
    {"request": {"typeId": "hello.greet", "inputs": {"name": "Ada"}}},
    {"request": {"typeId": "t.x", "inputs": {"items": [1, 2, 3]},
                 "budget": {"maxFuel": 1000000, "maxToolCalls": 3, "maxCostUsd": 0.5, "thresholdPercent": 80},
                 "bounds": {"runTimeoutMs": 5000, "maxLoopIterations": 10},
                 "context": {"runId": "r1", "nodeId": "n1", "tenantId": "t", "attempt": 2}},
     "limits": {"fuel": 1000, "fuelPerItem": 100, "itemsPointer": "/items", "fuelPerInputByte": 2},
     "now": 1700000001000},
    {"request": {"typeId": "t.x", "inputs": {}, "budget": {"maxFuel": 10}},
     "ledger": {"runId": "r1", "startedAtMs": 1700000000000,
                "budget": {"maxFuel": 10, "onExhaustion": "fail"},
                "consumed": {"toolCalls": 0, "fuel": 9, "costUsd": 0.0},
                "thresholdsCrossed": [], "exhausted": None, "invocations": 1},
     "now": 1700000000500},
]
for r in reqs:
    put("admission", json.dumps(r))
