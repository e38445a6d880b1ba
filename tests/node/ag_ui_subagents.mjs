// AG-UI 1.0 capability discovery and sub-agent events through @ag-ui/client and @ag-ui/core:
// fetches the agent's capabilities where HttpAgent.getCapabilities() looks (the run URL plus
// `/capabilities`) and parses them with @ag-ui/core's AgentCapabilitiesSchema, then runs the
// agent with HttpAgent (whose verifier checks the SUBAGENT_* lifecycle rules) with
// forwardedProps.subagentEvents set as given, and prints what the client saw as JSON.
// Usage: AGENTD_KEY=KEY node ag_ui_subagents.mjs BASE_URL AGENT PROMPT true|false
import { HttpAgent } from "@ag-ui/client";
import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";

const [base, agentName, prompt, asked] = process.argv.slice(2);
const url = `${base}/ag-ui/${agentName}`;
const headers = { Authorization: `Bearer ${process.env.AGENTD_KEY}` };
const out = {};

const response = await fetch(`${url}/capabilities`, { headers: { ...headers, Accept: "application/json" } });
out.capabilitiesStatus = response.status;
const parsed = AgentCapabilitiesSchema.safeParse(await response.json());
out.capabilitiesValid = parsed.success;
out.capabilities = parsed.success ? parsed.data : String(parsed.error);

const agent = new HttpAgent({
  url, headers, threadId: `subagents-${Date.now()}`,
  initialMessages: [{ id: "u1", role: "user", content: prompt }],
});
out.types = [];
out.subagentEvents = [];
try {
  const { result } = await agent.runAgent(
    { runId: "subagents-1", forwardedProps: { subagentEvents: asked === "true" } },
    {
      onEvent({ event }) {
        out.types.push(event.type);
        if (event.type.startsWith("SUBAGENT_")) out.subagentEvents.push(event);
      },
      onRunErrorEvent({ event }) { out.runError = event.message; },
    },
  );
  out.result = result;
} catch (error) {
  out.thrown = String(error);
}
console.log(JSON.stringify(out));
