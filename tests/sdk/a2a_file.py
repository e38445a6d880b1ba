"""The A2A Python SDK (a2a-sdk) sending a FilePart with raw bytes and a mediaType to agentd's A2A
server (SPEC §11). Usage: a2a_file.py BASE_URL API_KEY PNG_HEX. Prints `file part ok`."""

import sys
import uuid

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState


async def main(base_url: str, key: str, png: bytes) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        card = await A2ACardResolver(http, f"{base_url}/a2a/chat").get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[
            Part(text="what is in the picture?"),
            Part(raw=png, media_type="image/png", filename="pixel.png"),
        ])
        answers = [event async for event in client.send_message(SendMessageRequest(message=message))]
        task = answers[-1].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.artifacts[0].parts[0].text == "one pixel", task.artifacts
        print("file part ok")


anyio.run(main, sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]))
