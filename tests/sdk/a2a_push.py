"""A2A push notifications with the A2A Python SDK (a2a-sdk) against agentd.

Usage: a2a_push.py BASE_URL USER_KEY ADMIN_KEY [BINDING]

BINDING is `JSONRPC` (the default) or `HTTP+JSON` (A2A 1.0's REST binding).

Runs a receiver on loopback that records every POST. As the user: reads the card
(`pushNotifications`), sends a message with the client's push-notification config (the SDK puts
it in `configuration.taskPushNotificationConfig`) and checks the receiver got the task's final
state with the config's token; starts a task that keeps running, creates, reads and lists a
config for it; checks the admin (who may see the task) neither lists, reads nor deletes the
user's config; cancels the task and checks the receiver got the cancelled state; deletes the
config. Every body is parsed as the SDK's `StreamResponse`. Prints one `<check> ok` per check.
"""

import json
import queue
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf import json_format

RECEIVED: "queue.Queue[tuple[str, dict, dict, float]]" = queue.Queue()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length))
        headers = {k.lower(): v for k, v in self.headers.items()}
        RECEIVED.put((self.path, headers, body, time.time()))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def start_receiver() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


async def notification(path: str, since: float) -> tuple[dict, StreamResponse]:
    """The next notification to `path` (its headers and the body as the SDK reads it); prints
    how long after `since` it arrived."""
    while True:
        got_path, headers, body, arrived = await anyio.to_thread.run_sync(lambda: RECEIVED.get(timeout=30))
        if got_path == path:
            print(f"delay {path} {arrived - since:.3f} s")
            return headers, json_format.ParseDict(body, StreamResponse())


def request(text: str) -> SendMessageRequest:
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    return SendMessageRequest(message=message)


BINDING = sys.argv[4] if len(sys.argv) > 4 else "JSONRPC"


async def client(http: httpx.AsyncClient, base_url: str, **config):
    card = await A2ACardResolver(http, f"{base_url}/a2a/chat").get_agent_card()
    settings = ClientConfig(
        httpx_client=http, streaming=False, supported_protocol_bindings=[BINDING], **config
    )
    return card, ClientFactory(settings).create(card)


async def main(base_url: str, user_key: str, admin_key: str) -> None:
    receiver = start_receiver()
    user_http = httpx.AsyncClient(headers={"Authorization": f"Bearer {user_key}"}, timeout=60)
    admin_http = httpx.AsyncClient(headers={"Authorization": f"Bearer {admin_key}"}, timeout=60)
    async with user_http, admin_http:
        push = TaskPushNotificationConfig(url=f"{receiver}/first", token="tok-first")
        card, pushing = await client(user_http, base_url, push_notification_config=push)
        assert card.capabilities.push_notifications, card.capabilities
        print("card ok")

        answers = [event async for event in pushing.send_message(request("Say hello"))]
        task = answers[-1].task
        answered = time.time()
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        headers, pushed = await notification("/first", answered)
        assert headers.get("x-a2a-notification-token") == "tok-first", headers
        assert pushed.WhichOneof("payload") == "task", pushed
        assert pushed.task.id == task.id, (pushed, task.id)
        assert pushed.task.status.state == TaskState.TASK_STATE_COMPLETED, pushed
        assert pushed.task.artifacts[0].parts[0].text == "Pushed hello", pushed
        print("pushed final state ok")

        _, polling = await client(user_http, base_url, polling=True)
        started = [event async for event in polling.send_message(request("take your time"))][-1].task
        assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING), started
        created = await polling.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=started.id, id="second", url=f"{receiver}/second", token="tok-second")
        )
        assert (created.id, created.task_id, created.token) == ("second", started.id, "tok-second"), created
        got = await polling.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=started.id, id="second")
        )
        assert got.url == f"{receiver}/second", got
        listed = await polling.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=started.id)
        )
        assert [c.id for c in listed.configs] == ["second"], listed
        print("config crud ok")

        _, admin = await client(admin_http, base_url)
        theirs = await admin.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=started.id)
        )
        assert list(theirs.configs) == [], theirs
        for call in (admin.get_task_push_notification_config, admin.delete_task_push_notification_config):
            request_type = (
                GetTaskPushNotificationConfigRequest
                if call == admin.get_task_push_notification_config
                else DeleteTaskPushNotificationConfigRequest
            )
            try:
                await call(request_type(task_id=started.id, id="second"))
            except Exception as error:  # the SDK raises its error for the JSON-RPC error
                assert "second" in str(error), error
            else:
                raise AssertionError("another caller reached the user's config")
        still = await polling.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=started.id)
        )
        assert [c.id for c in still.configs] == ["second"], still
        print("owner scoped ok")

        cancelled = await polling.cancel_task(CancelTaskRequest(id=started.id))
        answered = time.time()
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        headers, pushed = await notification("/second", answered)
        assert headers.get("x-a2a-notification-token") == "tok-second", headers
        assert pushed.task.id == started.id, pushed
        assert pushed.task.status.state == TaskState.TASK_STATE_CANCELED, pushed
        print("pushed cancel ok")

        await polling.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=started.id, id="second")
        )
        gone = await polling.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=started.id)
        )
        assert list(gone.configs) == [], gone
        print("deleted ok")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
