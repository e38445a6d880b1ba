"""Older OpenAI clients against agentd (tests/api/openai_clients.rs), in the order the mock
upstream's replies are queued:

- LangChain's ChatOpenAI with `stop`, as every ReAct agent calls it, plain and streamed;
- LlamaIndex's OpenAILike with its defaults (`is_chat_model=False`: POST /v1/completions),
  plain and streamed;
- Open WebUI 0.12.4's requests to an OpenAI connection, REPLAYED: Open WebUI itself is too heavy
  to install here (torch and CUDA wheels), so this sends the bodies its backend builds
  (open_webui/routers/openai.py, routers/tasks.py, utils/payload.py of 0.12.4) with aiohttp,
  the HTTP client and version it uses: the model list, a streamed chat with the parameters a
  person set in its settings, the title request and the tags request. This is not the client.

Usage: python openai_clients.py BASE_URL KEY; prints one "... ok" line per check.
"""

import asyncio
import json
import sys

base, key = sys.argv[1], sys.argv[2]

# LangChain: `stop` reaches agentd, which passes it to the model.
from langchain_openai import ChatOpenAI

chat = ChatOpenAI(base_url=f"{base}/v1", api_key=key, model="chat", max_retries=0)
reply = chat.invoke("Which tool do you need?", stop=["Observation:"])
assert reply.content == "Thought: I should look it up.", reply
print("langchain invoke with stop ok")
streamed = "".join(chunk.content for chunk in chat.stream("Go on.", stop=["Observation:"]))
assert streamed == "Action: search", streamed
print("langchain stream with stop ok")

# LlamaIndex: OpenAILike's defaults call the legacy completions endpoint.
from llama_index.llms.openai_like import OpenAILike

llama = OpenAILike(model="chat", api_base=f"{base}/v1", api_key=key, max_retries=0)
assert not llama.metadata.is_chat_model
completion = llama.complete("The capital of France is")
assert completion.text == "Paris.", completion
print("llamaindex complete ok")
deltas = [response.delta for response in llama.stream_complete("Count to three:")]
assert "".join(deltas) == "one two three", deltas
print("llamaindex stream_complete ok")

# Open WebUI 0.12.4's requests, replayed (see above).
import aiohttp

HEADERS = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


async def open_webui_requests():
    async with aiohttp.ClientSession(trust_env=True) as session:
        # get_all_models: the connection's model list.
        async with session.get(f"{base}/v1/models", headers=HEADERS) as r:
            assert r.status == 200, await r.text()
            models = await r.json()
        assert "chat" in [m["id"] for m in models["data"]], models
        print("open-webui models ok")

        # A person's message: the backend drops its own keys (metadata, params, ids, files,
        # features, …), puts the model's and the person's parameters at the top level (stop from
        # the settings, seed, temperature, penalties) and asks for usage when streaming.
        chat = {
            "stream": True,
            "model": "chat",
            "messages": [
                {"role": "system", "content": "You are Open WebUI's assistant."},
                {"role": "user", "content": "Hello!"},
            ],
            "stream_options": {"include_usage": True},
            "temperature": 0.8,
            "top_p": 0.9,
            "seed": 7,
            "frequency_penalty": 0.2,
            "presence_penalty": 0.1,
            "stop": ["<|im_end|>"],
            "max_tokens": 256,
        }
        async with session.post(
            f"{base}/v1/chat/completions", data=json.dumps(chat), headers=HEADERS
        ) as r:
            assert r.status == 200, await r.text()
            assert "text/event-stream" in r.headers.get("Content-Type", ""), r.headers
            text, usage, done = "", None, False
            async for line in r.content:
                line = line.decode().strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    done = True
                    continue
                frame = json.loads(data)
                for choice in frame.get("choices", []):
                    text += choice["delta"].get("content") or ""
                usage = frame.get("usage") or usage
        assert done and text == "Hello! How can I help?", (done, text)
        assert usage and usage["total_tokens"] > 0, usage
        print("open-webui chat ok")

        # Background tasks after the first answer: the title (the task model's max_tokens,
        # 1000 by default) and the tags, each one user message holding the task prompt and the
        # chat so far, not streamed.
        history = "<chat_history>\nUSER: Hello!\nASSISTANT: Hello! How can I help?\n</chat_history>"
        for task, extra, expected in [
            ("title", {"max_tokens": 1000}, '{"title": "Greeting"}'),
            ("tags", {}, '{"tags": ["General"]}'),
        ]:
            body = {
                "model": "chat",
                "messages": [
                    {
                        "role": "user",
                        "content": f"### Task:\nGenerate the chat's {task} as JSON.\n### Chat History:\n{history}",
                    }
                ],
                "stream": False,
                **extra,
            }
            async with session.post(
                f"{base}/v1/chat/completions", data=json.dumps(body), headers=HEADERS
            ) as r:
                assert r.status == 200, await r.text()
                answer = await r.json()
            content = answer["choices"][0]["message"]["content"]
            assert content == expected, answer
            json.loads(content)
            print(f"open-webui {task} ok")


asyncio.run(open_webui_requests())
