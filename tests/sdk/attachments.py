"""The OpenAI and Anthropic Python SDKs sending attachments to a running agentd (SPEC §11): an
`image_url` data URL on chat completions, `files.create` then a `file` part naming its `file_id`,
the rest of the Files API (list, retrieve, content, delete), a Responses `input_image` (and its
`input_tokens` count), and Anthropic `image` and `document` blocks on /v1/messages. Usage: attachments.py BASE_URL API_KEY PNG_HEX.
Prints one line per check and exits non-zero on the first failure."""
import base64
import sys

import anthropic
import openai

base, key, png_hex = sys.argv[1], sys.argv[2], sys.argv[3]
png = bytes.fromhex(png_hex)
oa = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)

data_url = "data:image/png;base64," + base64.b64encode(png).decode()
reply = oa.chat.completions.create(model="chat", messages=[{"role": "user", "content": [
    {"type": "text", "text": "describe the image"},
    {"type": "image_url", "image_url": {"url": data_url, "detail": "low"}},
]}])
assert reply.choices[0].message.content == "a single pixel", reply
print("openai image_url ok")

uploaded = oa.files.create(file=("notes.md", b"# Plan\nship on friday", "text/markdown"),
                           purpose="user_data")
assert uploaded.id.startswith("file-") and uploaded.bytes == 21, uploaded
assert uploaded.filename == "notes.md" and uploaded.purpose == "user_data", uploaded
print("openai files.create ok")

reply = oa.chat.completions.create(model="chat", messages=[{"role": "user", "content": [
    {"type": "text", "text": "when do we ship?"},
    {"type": "file", "file": {"file_id": uploaded.id}},
]}])
assert reply.choices[0].message.content == "on friday", reply
print("openai file_id ok")

listed = [f.id for f in oa.files.list()]
assert uploaded.id in listed, listed
assert oa.files.retrieve(uploaded.id).filename == "notes.md"
assert oa.files.content(uploaded.id).content == b"# Plan\nship on friday"
print("openai files list/retrieve/content ok")

try:
    oa.chat.completions.create(model="chat", messages=[{"role": "user", "content": [
        {"type": "text", "text": "and this?"},
        {"type": "file", "file": {"filename": "x.bin", "file_data": base64.b64encode(b"\0\xff\0").decode()}},
    ]}])
    raise SystemExit("a binary file was accepted")
except openai.APIStatusError as error:
    assert error.status_code == 415, error
    assert error.body["param"] == "messages[0].content[1].file.file_data", error.body
print("openai refused attachment ok")

deleted = oa.files.delete(uploaded.id)
assert deleted.deleted and deleted.id == uploaded.id, deleted
print("openai files.delete ok")

response = oa.responses.create(model="chat", input=[{"role": "user", "content": [
    {"type": "input_text", "text": "and in the Responses API?"},
    {"type": "input_image", "image_url": data_url, "detail": "auto"},
]}])
assert response.output_text == "a pixel, via responses", response
text_only = oa.responses.input_tokens.count(model="chat", input="and in the Responses API?")
with_image = oa.responses.input_tokens.count(model="chat", input=[{"role": "user", "content": [
    {"type": "input_text", "text": "and in the Responses API?"},
    {"type": "input_image", "image_url": data_url, "detail": "auto"},
]}])
assert with_image.input_tokens > text_only.input_tokens, (with_image, text_only)
print("openai responses input_image ok")

an = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
message = an.messages.create(model="chat", max_tokens=100, messages=[{"role": "user", "content": [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                 "data": base64.b64encode(png).decode()}},
    {"type": "text", "text": "what is this image?"},
]}])
assert message.content[-1].text == "a pixel, says claude", message
print("anthropic image ok")

pdf = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
message = an.messages.create(model="chat", max_tokens=100, messages=[{"role": "user", "content": [
    {"type": "document", "title": "spec.pdf", "source": {"type": "base64", "media_type": "application/pdf",
                                                         "data": base64.b64encode(pdf).decode()}},
    {"type": "text", "text": "summarise the document"},
]}])
assert message.content[-1].text == "an empty PDF", message
print("anthropic document ok")
