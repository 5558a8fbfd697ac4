"""MCP client from the official Python SDK calling a tool once.

usage: mcp_client_refused.py URL TOKEN [NAME_BYTES [KEY]]
  NAME_BYTES: call with a name of that many bytes instead of "Ada"
  KEY: the call's idempotency key (`_meta` "dev.openwop/idempotencyKey")
  -> prints "ready" once initialized, calls the tool when a line arrives on
     stdin, then prints one JSON line: {"error": {code, message, data}} when
     the call raised an MCP error, else {"isError": bool, "text": str,
     "structuredContent": object or null}
"""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


async def main(url: str, token: str, name: str, key: str | None) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            try:
                meta = {"dev.openwop/idempotencyKey": key} if key else None
                result = await session.call_tool("wop.samples.hello", {"name": name}, meta=meta)
            except MCPError as e:
                print(json.dumps({"error": {"code": e.code, "message": e.message, "data": e.data}}))
                return
            text = result.content[0].text if result.content else ""
            is_error = getattr(result, "is_error", None)
            if is_error is None:
                is_error = getattr(result, "isError", False)
            structured = getattr(result, "structured_content", None)
            if structured is None:
                structured = getattr(result, "structuredContent", None)
            print(json.dumps({"isError": bool(is_error), "text": text, "structuredContent": structured}))


if __name__ == "__main__":
    name = "a" * int(sys.argv[3]) if len(sys.argv) > 3 else "Ada"
    key = sys.argv[4] if len(sys.argv) > 4 else None
    asyncio.run(main(sys.argv[1], sys.argv[2], name, key))
