"""The official MCP Python SDK calling an agent with files (SPEC §11) at agentd's /mcp.

Usage: mcp_attachments.py BASE_URL API_KEY PNG_BASE64

Reads `chat`'s input schema (it offers `attachments`), calls `chat` with a prompt and a PNG in
`attachments` (its answer is the agent's), then with a file the server refuses (invalid params
naming `arguments.attachments[0]`). Prints one `<check> ok` line per check.
"""

import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


async def main(base_url: str, key: str, png: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            chat = next(tool for tool in listed.tools if tool.name == "chat")
            assert "attachments" in chat.input_schema["properties"], chat.input_schema
            print("schema ok")

            files = [{"name": "pixel.png", "media_type": "image/png", "data": png}]
            result = await session.call_tool("chat", {"prompt": "What is this?", "attachments": files})
            assert not result.is_error, result
            assert result.content[0].text == "a pixel", result.content
            print("call with a file ok")

            try:
                await session.call_tool("chat", {"prompt": "and this?", "attachments": [{"data": "AAH/AA=="}]})
                raise AssertionError("a binary file was accepted")
            except MCPError as error:
                assert "arguments.attachments[0]" in str(error), str(error)
            print("refused file ok")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
