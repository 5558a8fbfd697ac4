"""MCP client from the official Python SDK calling a tool once.

usage: mcp_client_refused.py URL TOKEN [NAME_BYTES]
  NAME_BYTES: call with a name of that many bytes instead of "Ada"
  -> prints "ready" once initialized, calls the tool when a line arrives on
     stdin, then prints one JSON line: {"error": {code, message, data}} when
     the call raised an MCP error, else {"isError": bool, "text": str}
"""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


async def main(url: str, token: str, name: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            try:
                result = await session.call_tool("wop.samples.hello", {"name": name})
            except MCPError as e:
                print(json.dumps({"error": {"code": e.code, "message": e.message, "data": e.data}}))
                return
            text = result.content[0].text if result.content else ""
            is_error = getattr(result, "is_error", None)
            if is_error is None:
                is_error = getattr(result, "isError", False)
            print(json.dumps({"isError": bool(is_error), "text": text}))


if __name__ == "__main__":
    name = "a" * int(sys.argv[3]) if len(sys.argv) > 3 else "Ada"
    asyncio.run(main(sys.argv[1], sys.argv[2], name))
