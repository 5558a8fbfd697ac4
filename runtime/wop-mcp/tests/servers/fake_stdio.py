"""A tiny stdio MCP server (stdlib only) with scripted behaviours.

Usage: fake_stdio.py MODE [VERSION]
  legacy     - no server/discover; answers initialize with VERSION (default 2025-06-18)
  modern     - answers server/discover with supportedVersions [VERSION or 2026-07-28]
  huge       - legacy; tools/call answers a result of 4 MiB on one line
  endless    - legacy; tools/call starts a result and never ends the line
  invalid    - legacy; tools/call answers a line that is not JSON
  wrongid    - legacy; tools/call answers with another id (and never the right one)
  flood      - legacy; tools/call sends 50000 notifications, then the answer
  silent     - legacy; tools/call is never answered
  stderr     - legacy; floods stderr (64 MiB) then answers normally
  exit       - legacy; exits (status 3) when tools/call arrives
  mute       - reads everything, answers nothing (not even the handshake)
  badutf8    - legacy; tools/call answers a line with invalid UTF-8 in a string
Tool "env" answers the process environment and cwd; tool "fail" answers
isError: true; tool "rpcerror" answers a JSON-RPC error (-32000); tool "pad"
answers a text of `arguments.bytes` x's. Every other tools/call answer echoes params (incl. _meta) in structuredContent.

Environment (set through the server's `env` in the policy):
  FAKE_MCP_START_DELAY_MS  sleep this long before reading anything (a slow start)
  FAKE_MCP_LOG             append every request received ({"method", "params"}) as
                           one JSON line to this file: what reached the server
  FAKE_MCP_FAIL_FIRST      a path: when it does not exist, create it and exit (1)
                           before answering anything (the first start fails)
"""
import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "legacy"
VERSION = sys.argv[2] if len(sys.argv) > 2 else None
out = sys.stdout


def send(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()


def result(rid, res):
    send({"jsonrpc": "2.0", "id": rid, "result": res})


def error(rid, code, message):
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def call_tool(rid, params):
    if MODE == "huge":
        out.write('{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"' % rid)
        out.write("x" * (4 * 1024 * 1024))
        out.write('"}]}}\n')
        out.flush()
        return
    if MODE == "endless":
        out.write('{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"' % rid)
        chunk = "y" * 65536
        while True:
            out.write(chunk)
            out.flush()
    if MODE == "invalid":
        out.write("{this is not json\n")
        out.flush()
        return
    if MODE == "wrongid":
        result(rid + 1000, {"content": [], "isError": False})
        return
    if MODE == "flood":
        for i in range(50000):
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": "n%d" % i}})
    if MODE == "silent":
        return
    if MODE == "stderr":
        line = ("E" * 1023 + "\n").encode()
        for _ in range(64 * 1024):
            sys.stderr.buffer.write(line)
        sys.stderr.flush()
    if MODE == "badutf8":
        out.flush()
        sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"\xff\xfe"}]}}\n' % rid)
        sys.stdout.buffer.flush()
        return
    if params.get("name") == "rpcerror":
        error(rid, -32000, "tool exploded")
        return
    if MODE == "exit":
        sys.stderr.write("fake server: exiting mid-call\n")
        sys.stderr.flush()
        sys.exit(3)
    if params.get("name") == "env":
        result(rid, {"content": [], "structuredContent": {"env": dict(os.environ), "cwd": os.getcwd()}})
        return
    if params.get("name") == "pad":
        n = int((params.get("arguments") or {}).get("bytes", 0))
        result(rid, {"content": [{"type": "text", "text": "x" * n}], "isError": False})
        return
    if params.get("name") == "fail":
        result(rid, {"content": [{"type": "text", "text": "tool failed"}], "isError": True})
        return
    result(rid, {
        "content": [{"type": "text", "text": json.dumps(params.get("arguments"))}],
        "structuredContent": {"params": params},
        "isError": False,
        "x-extra": {"kept": True},
    })


def main():
    delay = int(os.environ.get("FAKE_MCP_START_DELAY_MS", "0"))
    if delay:
        time.sleep(delay / 1000)
    first = os.environ.get("FAKE_MCP_FAIL_FIRST")
    if first and not os.path.exists(first):
        open(first, "w").close()
        sys.stderr.write("fake server: failing its first start\n")
        sys.exit(1)
    log = os.environ.get("FAKE_MCP_LOG")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        rid = msg.get("id")
        params = msg.get("params") or {}
        if rid is None:
            continue
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({"method": method, "params": params}) + "\n")
        if MODE == "mute":
            continue
        if method == "server/discover":
            if MODE == "modern":
                result(rid, {
                    "resultType": "complete",
                    "supportedVersions": [VERSION or "2026-07-28"],
                    "capabilities": {"tools": {}},
                    "ttlMs": 0,
                    "cacheScope": "private",
                })
            else:
                error(rid, -32601, "Method not found")
        elif method == "initialize":
            if MODE == "modern":
                error(rid, -32601, "initialize removed in 2026-07-28")
            else:
                result(rid, {
                    "protocolVersion": VERSION or "2025-06-18",
                    "capabilities": {"tools": {}, "resources": {}},
                    "serverInfo": {"name": "fake", "version": "0"},
                })
        elif method == "ping":
            result(rid, {})
        elif method == "tools/list":
            cursor = params.get("cursor")
            if cursor is None:
                result(rid, {"tools": [{"name": "a", "inputSchema": {"type": "object"}}],
                             "nextCursor": "page2"})
            else:
                result(rid, {"tools": [{"name": "b", "inputSchema": {"type": "object"}}]})
        elif method == "resources/read":
            result(rid, {"contents": [{"uri": params.get("uri"), "text": "fake"}]})
        elif method == "tools/call":
            call_tool(rid, params)
        else:
            error(rid, -32601, "Method not found")


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
