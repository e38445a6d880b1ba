// Reads agentd's AI SDK UI message stream with the `ai` package's own parser and transport,
// and prints the messages they built, as JSON.
// Usage: AGENTD_KEY=KEY node ai_sdk_stream.mjs BASE_URL USER CHAT_ID PROMPT [resume]
//   without `resume`: DefaultChatTransport.sendMessages posts useChat's body and
//   readUIMessageStream assembles the answer;
//   with `resume`: DefaultChatTransport.reconnectToStream resumes the chat's answer.
// AI_PACKAGE picks the package: `ai` (the current major) or `ai6` (the previous one); AI_AGENT,
// when set, names the agent that answers (the transport's `body.agent`).
const { DefaultChatTransport, readUIMessageStream } = await import(process.env.AI_PACKAGE ?? "ai");

const [base, user, chatId, prompt, mode] = process.argv.slice(2);
const transport = new DefaultChatTransport({
  api: `${base}/api/${user}/chat`,
  headers: { Authorization: `Bearer ${process.env.AGENTD_KEY}` },
  body: process.env.AI_AGENT ? { agent: process.env.AI_AGENT } : undefined,
});

async function lastMessage(stream) {
  let last = null;
  const errors = [];
  for await (const message of readUIMessageStream({
    stream,
    onError: (error) => errors.push(String(error)),
  })) {
    last = message;
  }
  return { message: last, errors };
}

let stream;
if (mode === "resume") {
  stream = await transport.reconnectToStream({ chatId });
  if (stream === null) {
    console.log(JSON.stringify({ resumed: false }));
    process.exit(0);
  }
} else {
  stream = await transport.sendMessages({
    chatId,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: prompt }] }],
  });
}
const { message, errors } = await lastMessage(stream);
console.log(JSON.stringify({ resumed: mode === "resume", message, errors }));
