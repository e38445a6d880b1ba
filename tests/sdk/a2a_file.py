"""The A2A Python SDK (a2a-sdk) sending FileParts to agentd's A2A server (SPEC §11): raw bytes
with a mediaType, then a URL. Usage: a2a_file.py BASE_URL API_KEY PNG_HEX IMAGE_URL. Prints
`file part ok` and `url part ok`."""

import sys
import uuid

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState


async def ask(client, parts):
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts)
    answers = [event async for event in client.send_message(SendMessageRequest(message=message))]
    task = answers[-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    return task.artifacts[0].parts[0].text


async def main(base_url: str, key: str, png: bytes, image_url: str) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        card = await A2ACardResolver(http, f"{base_url}/a2a/chat").get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        answer = await ask(client, [
            Part(text="what is in the picture?"),
            Part(raw=png, media_type="image/png", filename="pixel.png"),
        ])
        assert answer == "one pixel", answer
        print("file part ok")
        answer = await ask(client, [
            Part(text="and this one?"),
            Part(url=image_url, media_type="image/png", filename="cat.png"),
        ])
        assert answer == "a cat, by URL", answer
        print("url part ok")


anyio.run(main, sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]), sys.argv[4])
