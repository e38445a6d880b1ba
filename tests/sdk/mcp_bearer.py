"""The official MCP Python SDK against agentd's /mcp with an OpenID provider's bearer token.

Usage: mcp_bearer.py BASE_URL TOKEN

Lists the agents as tools (only those the token's `agents:NAME:run` scopes allow must appear)
and calls `chat`. Prints `tools <names>` and `call ok`.
"""

import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(base_url: str, token: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            print("tools " + ",".join(sorted(tool.name for tool in listed.tools)))
            result = await session.call_tool("chat", {"prompt": "Say hello"})
            assert not result.is_error, result
            assert result.content[0].text == "Hello through a token", result.content
            print("call ok")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
