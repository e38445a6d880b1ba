// Drives agentd through @ag-ui/client's HttpAgent the way a frontend with its own tools and an
// approval dialog does, and prints what the client saw as JSON:
// 1. a client tool round trip: the run ends with a call of `get_weather` (a tool this script
//    answers), the script adds the tool message and runs again, which answers in text;
// 2. an approval: the run ends with an interrupt, the script resumes it with an approval
//    with AG-UI 1.0's payload {approved: true}, and the resumed run answers.
// Usage: AGENTD_KEY=KEY node ag_ui_tools.mjs BASE_URL TOOL_AGENT APPROVAL_AGENT
import { HttpAgent } from "@ag-ui/client";

const [base, toolAgent, approvalAgent] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${process.env.AGENTD_KEY}` };
const text = (messages) =>
  messages.filter((m) => m.role === "assistant" && m.content).map((m) => m.content).join("");
const out = {};

const tools = [{
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}];
const weather = { Paris: "sunny", Oslo: "snowing" };
const agent = new HttpAgent({
  url: `${base}/ag-ui/${toolAgent}`, headers, threadId: `tools-${Date.now()}`,
  initialMessages: [{ id: "u1", role: "user", content: "What is the weather in Paris?" }],
});
const firstTypes = [];
await agent.runAgent({ runId: "tools-1", tools }, { onEvent({ event }) { firstTypes.push(event.type); } });
const call = agent.messages.flatMap((m) => m.toolCalls ?? [])[0];
out.firstTypes = firstTypes;
out.call = call;
const city = JSON.parse(call.function.arguments).city;
agent.addMessage({ id: "tool-1", role: "tool", toolCallId: call.id, content: weather[city] ?? "unknown" });
const second = await agent.runAgent({ runId: "tools-2", tools });
out.toolAnswer = text(second.newMessages);

const approver = new HttpAgent({
  url: `${base}/ag-ui/${approvalAgent}`, headers, threadId: `approve-${Date.now()}`,
  initialMessages: [{ id: "u1", role: "user", content: "Echo hi" }],
});
let finished = null;
await approver.runAgent({ runId: "ask-1" }, { onRunFinishedEvent({ event }) { finished = event; } });
const interrupts = finished?.outcome?.interrupts ?? [];
out.interrupts = interrupts;
out.pendingInterrupts = approver.pendingInterrupts.map((i) => i.id);
const resumed = await approver.runAgent({
  runId: "ask-2",
  resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { approved: true } })),
});
out.approvedAnswer = text(resumed.newMessages);
out.pendingAfter = approver.pendingInterrupts.length;
console.log(JSON.stringify(out));
