"""MCP client from the official Python SDK against wop-serve's /mcp.

usage: mcp_client.py URL TOKEN  -> prints one JSON line {tools, isError, text, protocolVersion}
"""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = create_mcp_http_client(headers=headers)
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool("wop.samples.hello", {"name": "Ada"})
            text = result.content[0].text if result.content else ""
            # mcp 2.x models use snake_case attributes (1.x: camelCase).
            def field(obj, snake, camel):
                return getattr(obj, snake, None) if hasattr(obj, snake) else getattr(obj, camel, None)

            print(json.dumps({
                "protocolVersion": str(field(init, "protocol_version", "protocolVersion")),
                "tools": [t.name for t in tools.tools],
                "isError": bool(field(result, "is_error", "isError")),
                "text": text,
            }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
