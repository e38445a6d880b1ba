"""The official MCP Python SDK (streamable HTTP) against agentd's /mcp.

Usage: mcp_client.py BASE_URL API_KEY

Lists the agents as tools, calls `chat` with a progress token (progress must arrive and the
answer is the agent's), calls an unknown agent and one with bad arguments (JSON-RPC errors
naming what is wrong), then starts a call to `slow` and abandons it: the SDK sends
`notifications/cancelled`. Prints one `<check> ok` line per check.
"""

import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


async def main(base_url: str, key: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()

            listed = await session.list_tools()
            names = sorted(tool.name for tool in listed.tools)
            assert "chat" in names and "slow" in names, names
            chat = next(tool for tool in listed.tools if tool.name == "chat")
            assert chat.description == "A helpful chat agent", chat.description
            assert chat.input_schema["required"] == ["prompt"], chat.input_schema
            print("tools/list ok")

            progress: list[tuple[float, str | None]] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, message))

            result = await session.call_tool("chat", {"prompt": "Say hello"}, progress_callback=on_progress)
            assert not result.is_error, result
            assert result.content[0].text == "Hello from the mock upstream!", result.content
            assert progress and progress[0][1] == "turn 1", progress
            print("tools/call ok")
            print("progress ok")

            try:
                await session.call_tool("no-such-agent", {"prompt": "hi"})
                raise AssertionError("an unknown agent was called")
            except MCPError as error:
                assert "no-such-agent" in str(error), str(error)
            print("unknown agent ok")

            try:
                await session.call_tool("chat", {"text": "hi"})
                raise AssertionError("bad arguments were accepted")
            except MCPError as error:
                assert "input schema" in str(error), str(error)
            print("bad arguments ok")

            seen_turn = anyio.Event()

            async def on_slow_progress(value: float, total: float | None, message: str | None) -> None:
                seen_turn.set()

            async def slow_call() -> None:
                await session.call_tool("slow", {"prompt": "take your time"}, progress_callback=on_slow_progress)

            async with anyio.create_task_group() as group:
                group.start_soon(slow_call)
                with anyio.fail_after(20):
                    await seen_turn.wait()
                group.cancel_scope.cancel()
            print("cancel sent ok")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
