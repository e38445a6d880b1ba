"""The newest OpenAI Python SDK against agentd's Responses conversations (SPEC §15): the
Conversations API and its items, `conversation` on a response, `responses.input_tokens.count`,
`responses.compact`, and `include` / `truncation` / `prompt_cache_key` accepted. One line
`<scenario> ok` per scenario that passed; any failure raises. Args: base URL, API key."""

import sys

import openai
from openai import OpenAI

base, key = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
print(f"openai {openai.__version__}")


def texts(items):
    return [part.text for item in items if item.type == "message" for part in item.content]


conversation = client.conversations.create(
    items=[{"type": "message", "role": "user", "content": "My name is Ada."}],
    metadata={"title": "About Ada"},
)
assert conversation.id.startswith("conv_"), conversation
assert conversation.metadata == {"title": "About Ada"}, conversation
print("conversation_created ok")

first = client.responses.create(
    model="chat",
    input="What is my name?",
    conversation=conversation.id,
    truncation="auto",
    include=["reasoning.encrypted_content"],
    prompt_cache_key="ada-session",
)
assert first.output_text == "Ada.", first
assert first.conversation is not None and first.conversation.id == conversation.id, first
assert first.truncation == "auto", first
print("response_in_conversation ok")

listed = client.conversations.items.list(conversation.id, order="asc")
assert texts(listed.data) == ["My name is Ada.", "What is my name?", "Ada."], listed
newest = client.conversations.items.list(conversation.id, limit=1)
assert texts(newest.data) == ["Ada."] and newest.has_more, newest
print("items_listed ok")

added = client.conversations.items.create(
    conversation.id,
    items=[{"type": "message", "role": "user", "content": "My colour is blue."}],
)
assert texts(added.data) == ["My colour is blue."], added
item = client.conversations.items.retrieve(added.data[0].id, conversation_id=conversation.id)
assert item.id == added.data[0].id and item.type == "message", item
print("items_added ok")

second = client.responses.create(
    model="chat", input="And my colour?", conversation={"id": conversation.id}
)
assert second.output_text == "Blue.", second
print("conversation_continued ok")

counted = client.responses.input_tokens.count(
    model="chat", conversation=conversation.id, input="How long is this?"
)
assert counted.object == "response.input_tokens" and counted.input_tokens > 10, counted
print("input_tokens_counted ok")

compacted = client.responses.compact(
    model="chat",
    input=[
        {"role": "user", "content": "Plan a trip to Rome."},
        {"role": "assistant", "content": "Day one: the Colosseum."},
        {"role": "user", "content": "Add a day."},
    ],
)
assert compacted.object == "response.compaction", compacted
kinds = [item.type for item in compacted.output]
assert kinds == ["message", "message", "compaction"], kinds
after = client.responses.create(
    model="chat",
    input=[item.model_dump(exclude_none=True) for item in compacted.output]
    + [{"role": "user", "content": "Summarise the plan."}],
)
assert after.output_text == "Rome, two days.", after
print("compacted_and_continued ok")

try:
    client.responses.create(
        model="chat", input="hi", conversation=conversation.id, previous_response_id=first.id
    )
    raise AssertionError("conversation beside previous_response_id was taken")
except openai.BadRequestError as error:
    assert error.body["param"] == "conversation", error.body
print("conversation_with_previous_refused ok")

assert client.conversations.retrieve(conversation.id).id == conversation.id
deleted = client.conversations.delete(conversation.id)
assert deleted.deleted and deleted.id == conversation.id, deleted
try:
    client.conversations.retrieve(conversation.id)
    raise AssertionError("a deleted conversation was found")
except openai.NotFoundError:
    pass
print("conversation_deleted ok")
