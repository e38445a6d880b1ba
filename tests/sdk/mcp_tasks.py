"""The MCP Python SDK's experimental Tasks client (mcp 1.x, MCP 2025-11-25 SEP-1686) against
agentd's /mcp (tests/api/mcp_tasks.rs). Usage: mcp_tasks.py BASE_URL KEY SCENARIO, where
SCENARIO is:
  complete  the `chat` agent as a task: poll_task until completed, then tasks/result
  approve   the `approver` agent: poll until input_required, then tasks/result, whose
            elicitation is approved; the tool result follows on the same stream
  cancel    the `slow` agent as a task, cancelled while it works
Prints one `name: value` line per fact checked.
"""

import asyncio
import sys
import warnings

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

warnings.simplefilter("ignore", DeprecationWarning)


async def first_status(session, task_id, wanted):
    async for status in session.experimental.poll_task(task_id):
        if status.status == wanted:
            return status
    return status


async def main(base, key, scenario):
    elicitations = []

    async def approve(context, params):
        elicitations.append(params)
        related = (params.meta.model_extra or {}).get("io.modelcontextprotocol/related-task") if params.meta else None
        print(f"elicitation related task: {related['taskId'] if related else None}")
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    headers = {"Authorization": f"Bearer {key}"}
    async with streamablehttp_client(f"{base}/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=approve) as session:
            await session.initialize()
            if scenario == "complete":
                created = await session.experimental.call_tool_as_task("chat", {"prompt": "Say hello"})
                task_id = created.task.taskId
                print(f"created: {created.task.status}")
                final = await first_status(session, task_id, "completed")
                print(f"polled: {final.status}")
                result = await session.experimental.get_task_result(task_id, types.CallToolResult)
                print(f"result: {result.content[0].text}")
                print(f"is error: {result.isError}")
            elif scenario == "approve":
                created = await session.experimental.call_tool_as_task("approver", {"prompt": "Echo hi"})
                task_id = created.task.taskId
                waiting = await first_status(session, task_id, "input_required")
                print(f"polled: {waiting.status}")
                result = await session.experimental.get_task_result(task_id, types.CallToolResult)
                print(f"elicitations: {len(elicitations)}")
                print(f"task id matches: {task_id in [(e.meta.model_extra or {})['io.modelcontextprotocol/related-task']['taskId'] for e in elicitations]}")
                print(f"result: {result.content[0].text}")
                final = await session.experimental.get_task(task_id)
                print(f"final: {final.status}")
            elif scenario == "cancel":
                created = await session.experimental.call_tool_as_task("slow", {"prompt": "Wait"})
                task_id = created.task.taskId
                working = await session.experimental.get_task(task_id)
                print(f"working: {working.status}")
                cancelled = await session.experimental.cancel_task(task_id)
                print(f"cancel answered: {cancelled.taskId == task_id}")
                final = await first_status(session, task_id, "cancelled")
                print(f"final: {final.status}")
                try:
                    await session.experimental.cancel_task(task_id)
                    print("second cancel: accepted")
                except Exception as error:  # noqa: BLE001 - the SDK raises McpError
                    print(f"second cancel: refused ({error})")
            else:
                sys.exit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
