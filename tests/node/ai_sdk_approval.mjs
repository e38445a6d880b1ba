// The AI SDK's own chat (AbstractChat, what useChat wraps, with a plain state) against agentd's
// per-user chat, through a tool approval: the answer stops at an `approval-requested` tool
// part, the script approves it with addToolApprovalResponse, and the chat sends itself again
// (sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses), which resumes
// the run. Prints the chat's messages and status as JSON.
// Usage: AGENTD_KEY=KEY node ai_sdk_approval.mjs BASE_URL USER CHAT_ID AGENT PROMPT
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { Chat, settled } from "./plain_chat.mjs";

const [base, user, chatId, agent, prompt] = process.argv.slice(2);

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

await chat.sendMessage({ text: prompt });
await settled(chat);
const asked = chat.lastMessage.parts.find((p) => p.state === "approval-requested");
const before = structuredClone(chat.lastMessage);
if (asked) {
  await chat.addToolApprovalResponse({ id: asked.approval.id, approved: true });
  await settled(chat);
}
console.log(JSON.stringify({ asked: asked ?? null, before, after: chat.lastMessage, status: chat.status, errors }));
