"""A background response announced by webhook, read with the OpenAI Python SDK.

Usage: responses_webhook.py BASE_URL API_KEY WEBHOOK_SECRET RECEIVER_PORT

Runs a receiver on loopback at the port the server's `webhooks` config names, that checks every message with the SDK's own
`client.webhooks.unwrap` (Standard Webhooks signature and OpenAI's event types). Creates a
background response that completes and one that is cancelled, and checks each is announced
with its response id: `response.completed`, `response.cancelled`. Prints `<check> ok` lines.
"""

import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
from openai.types.webhooks import ResponseCancelledWebhookEvent, ResponseCompletedWebhookEvent

SECRET = sys.argv[3]
VERIFIER = openai.OpenAI(api_key="unused", webhook_secret=SECRET)
EVENTS: "queue.Queue[object]" = queue.Queue()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            EVENTS.put(VERIFIER.webhooks.unwrap(body, headers))
            self.send_response(200)
        except Exception as error:  # an unverifiable message fails the check below
            EVENTS.put(error)
            self.send_response(400)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def main(base_url: str, key: str, port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=key)

    done = client.responses.create(model="chat", input="Say hello", background=True)
    assert done.status in ("queued", "in_progress"), done
    event = EVENTS.get(timeout=30)
    assert isinstance(event, ResponseCompletedWebhookEvent), event
    assert event.data.id == done.id, (event, done.id)
    assert client.responses.retrieve(done.id).status == "completed"
    print("completed announced ok")

    hanging = client.responses.create(model="chat", input="take your time", background=True)
    cancelled = client.responses.cancel(hanging.id)
    assert cancelled.status == "cancelled", cancelled
    event = EVENTS.get(timeout=30)
    assert isinstance(event, ResponseCancelledWebhookEvent), event
    assert event.data.id == hanging.id, (event, hanging.id)
    print("cancelled announced ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[4]))
