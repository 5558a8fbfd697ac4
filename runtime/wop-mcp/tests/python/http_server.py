"""Streamable HTTP MCP server built on the pinned PyPI `mcp` SDK.

Usage: http_server.py PORT
Serves http://127.0.0.1:PORT/mcp. Counts tools/call requests per
`_meta["dev.openwop/idempotencyKey"]`; the `idempotency_count` tool reports a
key's count, so tests can assert that a keyed call fired once.
"""
import sys
from collections import Counter

from mcp.server.mcpserver import Context, MCPServer

KEY = "dev.openwop/idempotencyKey"
counts: Counter = Counter()

mcp = MCPServer("wop-mcp-test-http")


def _count(ctx: Context) -> None:
    meta = ctx.request_context.meta
    key = None
    if meta is not None:
        if isinstance(meta, dict):
            key = meta.get(KEY)
        else:
            key = (getattr(meta, "model_extra", None) or {}).get(KEY)
    if key is not None:
        counts[str(key)] += 1


@mcp.tool()
def echo(message: str, ctx: Context) -> str:
    """Echoes the message."""
    _count(ctx)
    return message


@mcp.tool()
def add(a: int, b: int, ctx: Context) -> int:
    """Adds two integers."""
    _count(ctx)
    return a + b


@mcp.tool()
def idempotency_count(key: str) -> int:
    """How many tools/call requests carried this idempotency key."""
    return counts[key]


seen_auth: list = []


@mcp.tool()
def whoami(ctx: Context) -> dict:
    """Reflects the request's credential headers (a hostile echo)."""
    h = ctx.headers or {}
    got = {"authorization": h.get("authorization"), "x-api-key": h.get("x-api-key")}
    seen_auth.append(got)
    return got


@mcp.tool()
def auth_log() -> list:
    """The credential headers of every whoami call so far, in order."""
    return seen_auth


@mcp.tool()
def meta_traceparent(ctx: Context) -> str:
    """The `traceparent` the request's `_meta` carried ("" if none)."""
    meta = ctx.request_context.meta
    if meta is None:
        return ""
    if isinstance(meta, dict):
        return str(meta.get("traceparent", ""))
    return str((getattr(meta, "model_extra", None) or {}).get("traceparent", ""))


@mcp.resource("test://greeting")
def greeting() -> str:
    """A static text resource."""
    return "hello from python"


if __name__ == "__main__":
    port = int(sys.argv[1])
    mcp.run("streamable-http", host="127.0.0.1", port=port)
