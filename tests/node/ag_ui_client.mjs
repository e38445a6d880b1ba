// Runs an agentd agent through @ag-ui/client's HttpAgent and prints what the client saw, as
// JSON: the events' types, the new messages, the result and any run error.
// Usage: AGENTD_KEY=KEY node ag_ui_client.mjs BASE_URL AGENT PROMPT [THREAD_ID]
import { HttpAgent } from "@ag-ui/client";

const [base, agentName, prompt, threadId] = process.argv.slice(2);
const agent = new HttpAgent({
  url: `${base}/ag-ui/${agentName}`,
  headers: { Authorization: `Bearer ${process.env.AGENTD_KEY}` },
  threadId: threadId || `thread-${Date.now()}`,
  initialMessages: [{ id: "m1", role: "user", content: prompt }],
});
const types = [];
let runError = null;
let toolResults = [];
try {
  const { result, newMessages } = await agent.runAgent(
    { runId: "client-run-1" },
    {
      onEvent({ event }) { types.push(event.type); },
      onRunErrorEvent({ event }) { runError = event.message; },
      onToolCallResultEvent({ event }) { toolResults.push(event.content); },
    },
  );
  console.log(JSON.stringify({ types, result, newMessages, runError, toolResults }));
} catch (error) {
  console.log(JSON.stringify({ types, runError: runError || String(error), toolResults, thrown: true }));
}
