// The AI SDK's own chat (AbstractChat, what useChat wraps, with a plain state) against agentd's
// per-user chat, through a tool approval: the answer stops at an `approval-requested` tool
// part, the script approves it with addToolApprovalResponse, and the chat sends itself again
// (sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses), which resumes
// the run. Prints the chat's messages and status as JSON.
// Usage: AGENTD_KEY=KEY node ai_sdk_approval.mjs BASE_URL USER CHAT_ID AGENT PROMPT
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

const [base, user, chatId, agent, prompt] = process.argv.slice(2);

/** A chat state without a UI framework: plain fields. */
class PlainState {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) { this.messages = [...this.messages, message]; }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) {
    this.messages = this.messages.map((m, i) => (i === index ? message : m));
  }
  snapshot(thing) { return structuredClone(thing); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new PlainState() }); }
}

const errors = [];
const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `${base}/api/${user}/chat`,
    headers: { Authorization: `Bearer ${process.env.AGENTD_KEY}` },
    body: { agent },
  }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onError: (error) => errors.push(String(error)),
});

const settled = async () => {
  for (let i = 0; i < 400 && chat.status !== "ready" && chat.status !== "error"; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};

await chat.sendMessage({ text: prompt });
await settled();
const asked = chat.lastMessage.parts.find((p) => p.state === "approval-requested");
const before = structuredClone(chat.lastMessage);
if (asked) {
  await chat.addToolApprovalResponse({ id: asked.approval.id, approved: true });
  await settled();
}
console.log(JSON.stringify({ asked: asked ?? null, before, after: chat.lastMessage, status: chat.status, errors }));
