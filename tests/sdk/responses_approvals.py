"""Tool approvals through the Responses API with the real OpenAI Python SDK (SPEC §8, §9.1): a
response that ends with an mcp_approval_request item, answered with an mcp_approval_response
after previous_response_id (approve, then the final text; streamed), and a denial the model
hears about. The mock upstream's replies are queued by tests/api/responses_approvals.rs.
Usage: responses_approvals.py BASE_URL API_KEY. Prints one line per check."""
import sys

import openai

base, key = sys.argv[1], sys.argv[2]
oa = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)

asked = oa.responses.create(model="approver", input="echo hi")
assert asked.status == "completed", asked
[request] = asked.output
assert request.type == "mcp_approval_request", request
assert request.name == "test__echo" and request.server_label == "test", request
print("mcp_approval_request ok")

kinds, text, final = [], "", None
for event in oa.responses.create(
    model="approver",
    previous_response_id=asked.id,
    input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
    stream=True,
):
    kinds.append(event.type)
    if event.type == "response.output_text.delta":
        text += event.delta
    if event.type == "response.completed":
        final = event.response
assert text == "It said hi.", (text, kinds)
assert final is not None and final.output_text == "It said hi.", final
assert [item.type for item in final.output] == ["mcp_call", "message"], final.output
assert "hi" in (final.output[0].output or ""), final.output[0]
print("approve ok")

asked = oa.responses.create(model="approver", input="echo rm")
[request] = asked.output
denied = oa.responses.create(
    model="approver",
    previous_response_id=asked.id,
    input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False}],
)
assert denied.output_text == "Not allowed.", denied
print("deny ok")
