"""The A2A Python SDK (a2a-sdk) against agentd's A2A server.

Usage: a2a_client.py BASE_URL API_KEY [BINDING]

Resolves the `chat` agent's card, sends a message (blocking), streams one, reads and lists the
tasks, then starts a task on `slow`, resubscribes to it and cancels it, over BINDING (`JSONRPC`,
the default, or `HTTP+JSON`: the client picks that interface from the card). Prints one
`<check> ok` line per check.
"""

import sys
import uuid

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)


def request(text: str) -> SendMessageRequest:
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    return SendMessageRequest(message=message)


BINDING = sys.argv[3] if len(sys.argv) > 3 else "JSONRPC"


async def client_for(http: httpx.AsyncClient, base_url: str, agent: str, streaming: bool):
    card = await A2ACardResolver(http, f"{base_url}/a2a/{agent}").get_agent_card()
    config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[BINDING])
    return card, ClientFactory(config).create(card)


async def main(base_url: str, key: str) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        card, blocking = await client_for(http, base_url, "chat", streaming=False)
        assert card.name == "chat", card
        assert card.skills[0].description == "A helpful chat agent", card.skills
        assert card.capabilities.streaming
        assert BINDING in [i.protocol_binding for i in card.supported_interfaces], card
        print("card ok")

        answers = [event async for event in blocking.send_message(request("Say hello"))]
        task = answers[-1].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.artifacts[0].parts[0].text == "Hello from the mock upstream!", task.artifacts
        assert task.context_id, task
        print("send ok")

        _, streaming = await client_for(http, base_url, "chat", streaming=True)
        kinds = []
        final_text = None
        last_state = None
        async for event in streaming.send_message(request("Say hello again")):
            kind = event.WhichOneof("payload")
            kinds.append(kind)
            if kind == "artifact_update":
                final_text = event.artifact_update.artifact.parts[0].text
            if kind == "status_update":
                last_state = event.status_update.status.state
        assert kinds[0] == "task", kinds
        assert "status_update" in kinds and "artifact_update" in kinds, kinds
        assert final_text == "Hello again!", final_text
        assert last_state == TaskState.TASK_STATE_COMPLETED, kinds
        print("stream ok")

        got = await blocking.get_task(GetTaskRequest(id=task.id))
        assert got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED, got
        assert any(m.role == Role.ROLE_USER and m.parts[0].text == "Say hello" for m in got.history), got.history
        print("get ok")

        listed = await blocking.list_tasks(ListTasksRequest(page_size=10))
        assert len(listed.tasks) == 2, listed
        print("list ok")

        _, slow = await client_for(http, base_url, "slow", streaming=True)
        slow_request = request("take your time")
        slow_request.configuration.return_immediately = True
        _, slow_blocking = await client_for(http, base_url, "slow", streaming=False)
        started = [event async for event in slow_blocking.send_message(slow_request)][-1].task
        assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING), started

        seen = []
        async with anyio.create_task_group() as group:

            async def follow() -> None:
                async for event in slow.subscribe(SubscribeToTaskRequest(id=started.id)):
                    seen.append(event)

            group.start_soon(follow)
            with anyio.fail_after(20):
                while not seen:
                    await anyio.sleep(0.05)
            print("resubscribe ok")
            cancelled = await slow.cancel_task(CancelTaskRequest(id=started.id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
            print("cancel ok")
            with anyio.fail_after(20):
                while not any(
                    e.WhichOneof("payload") == "status_update"
                    and e.status_update.status.state == TaskState.TASK_STATE_CANCELED
                    for e in seen
                ):
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()
        print("subscriber saw the cancel ok")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
