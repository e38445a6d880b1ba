"""A webhook receiver that verifies every message with the Standard Webhooks reference library
(`standardwebhooks`) and fails the first attempt of each message with 500. Prints its port, then
one JSON line per attempt: webhook-id, attempt number, whether the signature verified, the
event type, the path and when it arrived (Unix seconds).

Usage: receiver.py SECRET
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRET = sys.argv[1]
WEBHOOK = Webhook(SECRET)
ATTEMPTS = {}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        arrived = time.time()
        body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            payload = WEBHOOK.verify(body, headers)
            verified = True
        except WebhookVerificationError as error:
            payload, verified = {}, False
            print(json.dumps({"error": str(error)}), flush=True)
        message_id = headers.get("webhook-id", "")
        ATTEMPTS[message_id] = ATTEMPTS.get(message_id, 0) + 1
        attempt = ATTEMPTS[message_id]
        print(json.dumps({
            "id": message_id,
            "attempt": attempt,
            "verified": verified,
            "type": payload.get("type"),
            "run_id": (payload.get("data") or {}).get("run_id"),
            "path": self.path,
            "arrived": arrived,
        }), flush=True)
        self.send_response(500 if attempt == 1 else 204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
