"""Real SDK clients against a running agentd: the OpenAI and Anthropic Python SDKs must parse
every response, streamed and not. Usage: clients.py BASE_URL API_KEY. Prints one line per check
and exits non-zero on the first failure."""
import sys

import anthropic
import openai

base, key = sys.argv[1], sys.argv[2]
oa = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)

models = [m.id for m in oa.models.list()]
assert "chat" in models, models
print("openai models ok")

reply = oa.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}])
assert reply.choices[0].message.content == "Hello from the mock upstream!", reply
assert reply.choices[0].finish_reason == "stop" and reply.usage.total_tokens > 0, reply
print("openai non-streamed ok")

text, reasoning, usage = "", "", None
for chunk in oa.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}],
                                        stream=True, stream_options={"include_usage": True}):
    if chunk.usage:
        usage = chunk.usage
    for choice in chunk.choices:
        text += choice.delta.content or ""
assert text == "Hello from the mock upstream!", text
assert usage is not None and usage.completion_tokens > 0, usage
print("openai streamed ok")

try:
    oa.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    raise SystemExit("unknown model accepted")
except openai.NotFoundError as error:
    assert error.body["code"] == "unknown_model", error.body
print("openai errors ok")

an = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
message = an.messages.create(model="chat", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
assert message.content[-1].text == "Hello from the mock upstream!", message
assert message.stop_reason == "end_turn", message
print("anthropic non-streamed ok")

with an.messages.stream(model="chat", max_tokens=100, messages=[{"role": "user", "content": "hi"}]) as stream:
    streamed = "".join(stream.text_stream)
    final = stream.get_final_message()
assert streamed == "Hello from the mock upstream!", streamed
assert final.stop_reason == "end_turn", final
print("anthropic streamed ok")

try:
    an.messages.create(model="nope", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    raise SystemExit("unknown model accepted")
except anthropic.NotFoundError:
    pass
print("anthropic errors ok")
