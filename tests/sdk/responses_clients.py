"""Real clients of the Responses API and of client tools against a running agentd (SPEC §9.1,
§9.2): the OpenAI Python SDK (responses.create streamed and not, responses.stream, retrieve,
background + resume with starting_after, previous_response_id across three requests,
responses.parse with a json_schema, background + cancel), its Chat Completions tool loop with a
client tool, the Anthropic SDK's tool_use / tool_result loop, and the OpenAI Agents SDK running
an agent whose model is agentd with a @function_tool. The mock upstream's replies are queued by
tests/api/responses_clients.rs in the order of the checks below.
Usage: responses_clients.py BASE_URL API_KEY. Prints one line per check."""
import asyncio
import sys

import anthropic
import openai
import pydantic

base, key = sys.argv[1], sys.argv[2]
oa = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
HELLO = "Hello from the mock upstream!"

first = oa.responses.create(model="chat", input="hi")
assert first.status == "completed" and first.output_text == HELLO, first
assert first.usage.total_tokens > 0, first.usage
print("responses.create ok")

kinds, text, seqs = [], "", []
for event in oa.responses.create(model="chat", input="hi", stream=True):
    kinds.append(event.type)
    seqs.append(event.sequence_number)
    if event.type == "response.output_text.delta":
        text += event.delta
assert text == HELLO, text
assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
assert seqs == list(range(len(seqs))), seqs
print("responses.create stream ok")

with oa.responses.stream(model="chat", input="hi") as stream:
    helper_text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    final = stream.get_final_response()
assert helper_text == HELLO and final.output_text == HELLO, final
print("responses.stream ok")

again = oa.responses.retrieve(first.id)
assert again.id == first.id and again.output_text == HELLO, again
items = oa.responses.input_items.list(first.id)
assert items.data[0].type == "message", items
print("responses.retrieve ok")

background = oa.responses.create(model="chat", input="count", background=True)
assert background.status in ("queued", "in_progress"), background
whole = list(oa.responses.retrieve(background.id, stream=True))
resumed = list(oa.responses.retrieve(background.id, stream=True, starting_after=2))
assert whole[-1].type == "response.completed", whole[-1]
assert [e.sequence_number for e in resumed] == [e.sequence_number for e in whole[3:]], resumed
assert oa.responses.retrieve(background.id).output_text == "one two three"
print("background resume ok")

one = oa.responses.create(model="chat", input="My name is Ada.")
two = oa.responses.create(model="chat", input="What is my name?", previous_response_id=one.id)
three = oa.responses.create(model="chat", input="And again?", previous_response_id=two.id)
assert (one.output_text, two.output_text, three.output_text) == ("first", "second", "third")
assert three.previous_response_id == two.id
print("previous_response_id ok")


class City(pydantic.BaseModel):
    city: str


parsed = oa.responses.parse(model="report", input="Which city?", text_format=City)
assert parsed.output_parsed == City(city="Paris"), parsed
print("responses.parse ok")

weather_tool = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
messages = [{"role": "user", "content": "Weather in Rome?"}]
reply = oa.chat.completions.create(model="chat", messages=messages, tools=[weather_tool])
assert reply.choices[0].finish_reason == "tool_calls", reply
call = reply.choices[0].message.tool_calls[0]
assert call.function.name == "get_weather", call
messages.append(reply.choices[0].message.model_dump(exclude_none=True))
messages.append({"role": "tool", "tool_call_id": call.id, "content": "warm"})
reply = oa.chat.completions.create(model="chat", messages=messages, tools=[weather_tool])
assert reply.choices[0].message.content == "Warm in Rome", reply
print("chat completions tool loop ok")

an = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
tools = [{"name": "get_weather", "description": "The weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
conversation = [{"role": "user", "content": "Weather in Oslo?"}]
message = an.messages.create(model="chat", max_tokens=200, tools=tools, messages=conversation)
assert message.stop_reason == "tool_use", message
use = next(block for block in message.content if block.type == "tool_use")
assert use.name == "get_weather" and use.input == {"city": "Oslo"}, use
conversation.append({"role": "assistant", "content": message.content})
conversation.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "cold"}]})
message = an.messages.create(model="chat", max_tokens=200, tools=tools, messages=conversation)
assert message.stop_reason == "end_turn" and message.content[-1].text == "Cold in Oslo", message
print("anthropic tool loop ok")

from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.models.openai_responses import OpenAIResponsesModel  # noqa: E402

set_tracing_disabled(True)
asked = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    asked.append(city)
    return f"sunny in {city}"


async def run_agent():
    client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
    agent = Agent(name="weather", instructions="Answer about the weather.", tools=[get_weather],
                  model=OpenAIResponsesModel(model="chat", openai_client=client))
    return await Runner.run(agent, "Weather in Paris?")


result = asyncio.run(run_agent())
assert asked == ["Paris"], asked
assert result.final_output == "It is sunny in Paris", result.final_output
print("agents sdk function tool ok")

hanging = oa.responses.create(model="chat", input="wait", background=True)
for _ in range(100):
    if oa.responses.retrieve(hanging.id).status == "in_progress":
        break
cancelled = oa.responses.cancel(hanging.id)
assert cancelled.status == "cancelled", cancelled
print("background cancel ok")
