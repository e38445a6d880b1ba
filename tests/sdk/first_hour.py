"""What a newcomer meets with the real OpenAI and Anthropic Python SDKs: errors they can act on
(the exception class each SDK raises, the retry it does), the SDK corners (models.retrieve,
count_tokens, reasoning_content, n, a key's model list). Usage: first_hour.py BASE_URL ADMIN_KEY
CHAT_ONLY_KEY DOWN_URL. Prints one line per check; exits non-zero on the first failure."""
import sys

import anthropic
import openai

base, admin_key, chat_only_key, down_url = sys.argv[1:5]
oa = openai.OpenAI(base_url=f"{base}/v1", api_key=admin_key, max_retries=0)
hi = [{"role": "user", "content": "hi"}]

# An upstream that is not running: a 502 naming the endpoint and the cause.
try:
    oa.chat.completions.create(model="down", messages=hi)
    raise SystemExit("a run against a dead upstream succeeded")
except openai.InternalServerError as error:
    assert error.status_code == 502, error.status_code
    message = error.body["message"]
    assert f"cannot reach {down_url}" in message and "connection refused" in message, message
print("upstream down ok")

# An upstream that rate-limits: 429 with its Retry-After, which the SDK honours and retries.
try:
    oa.chat.completions.create(model="limited", messages=hi)
    raise SystemExit("a rate-limited run succeeded")
except openai.RateLimitError as error:
    assert error.response.headers.get("retry-after") == "1", dict(error.response.headers)
    assert error.body["code"] == "rate_limited", error.body
print("upstream rate limit ok")
retrying = openai.OpenAI(base_url=f"{base}/v1", api_key=admin_key, max_retries=1)
try:
    retrying.chat.completions.create(model="limited", messages=hi)
except openai.RateLimitError:
    pass
print("sdk retried once")

# A provider that refuses agentd's key: says so, and never shows the key.
try:
    oa.chat.completions.create(model="refused", messages=hi)
    raise SystemExit("a refused key succeeded")
except openai.APIStatusError as error:
    assert error.status_code == 502, error.status_code
    message = error.body["message"]
    assert "refused the API key" in message and "sk-upstream-secret" not in message, message
print("provider auth failure ok")

# Parameters out of OpenAI's ranges are refused by name.
for params, name in [({"n": 9}, "n"), ({"stop": ["A", "B", "C", "D", "E"]}, "stop"), ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"), ({"presence_penalty": 2.5}, "presence_penalty")]:
    try:
        oa.chat.completions.create(model="chat", messages=hi, **params)
        raise SystemExit(f"{name} was accepted")
    except openai.BadRequestError as error:
        assert error.body["param"] == name, error.body
print("out-of-range parameters ok")

# Non-streamed answers carry the reasoning, as streamed ones do.
reply = oa.chat.completions.create(model="chat", messages=hi)
assert reply.choices[0].message.content == "The answer.", reply
assert reply.choices[0].message.reasoning_content == "Thinking it over.", reply
print("reasoning_content ok")

# models.retrieve, and a key sees only the agents it may use.
assert oa.models.retrieve("chat").id == "chat"
try:
    oa.models.retrieve("nope")
    raise SystemExit("an unknown model was found")
except openai.NotFoundError:
    pass
limited = openai.OpenAI(base_url=f"{base}/v1", api_key=chat_only_key, max_retries=0)
assert [m.id for m in limited.models.list()] == ["chat"], [m.id for m in limited.models.list()]
try:
    limited.models.retrieve("down")
    raise SystemExit("a key saw an agent it may not use")
except openai.NotFoundError:
    pass
print("models ok")

# The Anthropic SDK: its own error classes from Anthropic-shaped errors, and count_tokens.
an = anthropic.Anthropic(base_url=base, api_key=admin_key, max_retries=0)
count = an.messages.count_tokens(model="chat", messages=hi)
assert count.input_tokens > 0, count
try:
    an.messages.create(model="limited", max_tokens=100, messages=hi)
    raise SystemExit("a rate-limited run succeeded")
except anthropic.RateLimitError as error:
    assert error.body["type"] == "error" and error.body["error"]["type"] == "rate_limit_error", error.body
keyless = anthropic.Anthropic(base_url=base, api_key="wrong-key", max_retries=0)
try:
    keyless.messages.create(model="chat", max_tokens=100, messages=hi)
    raise SystemExit("a wrong key was accepted")
except anthropic.AuthenticationError as error:
    assert error.body["type"] == "error", error.body
try:
    an.messages.create(model="nope", max_tokens=100, messages=hi)
    raise SystemExit("an unknown model was accepted")
except anthropic.NotFoundError as error:
    assert error.body["error"]["type"] == "not_found_error", error.body
print("anthropic ok")
