"""The official Python SDK's high-level `Client` in its default mode
(`mode="auto"`: `server/discover`, then stateless 2026-07-28 requests, with
response caching on) against wop-serve's /mcp.

usage: mcp_client_auto.py URL TOKEN
  -> prints one JSON line {protocolVersion, tools, isError, text, cached}
"""
import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        tools = await client.list_tools()
        again = await client.list_tools()
        result = await client.call_tool("wop.samples.hello", {"name": "Ada"})
        text = result.content[0].text if result.content else ""
        print(json.dumps({
            "protocolVersion": str(client.protocol_version),
            "tools": [t.name for t in tools.tools],
            "ttlMs": tools.ttl_ms,
            "cacheScope": tools.cache_scope,
            "sameAgain": [t.name for t in again.tools] == [t.name for t in tools.tools],
            "isError": bool(result.is_error),
            "text": text,
        }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
