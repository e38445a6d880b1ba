// The AI SDK's own chat (AbstractChat, what useChat wraps, with a plain state) sending a file
// part (SPEC §11): sendMessage({text, files}) with a PNG as a data URL, as useChat's file input
// builds it, then a second message without files in the same chat. Prints the parts the
// transport sent in its first request, the answers and the chat's status as JSON.
// Usage: AGENTD_KEY=KEY node ai_sdk_files.mjs BASE_URL USER CHAT_ID PNG_BASE64
import { DefaultChatTransport } from "ai";
import { Chat, settled } from "./plain_chat.mjs";

const [base, user, chatId, png] = process.argv.slice(2);

const sent = [];
const errors = [];
const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `${base}/api/${user}/chat`,
    headers: { Authorization: `Bearer ${process.env.AGENTD_KEY}` },
    fetch: async (url, init) => {
      sent.push(JSON.parse(init.body));
      return fetch(url, init);
    },
  }),
  onError: (error) => errors.push(String(error)),
});

const text = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

await chat.sendMessage({
  text: "What is in this picture?",
  files: [{ type: "file", mediaType: "image/png", filename: "pixel.png", url: `data:image/png;base64,${png}` }],
});
await settled(chat);
const first = text(chat.lastMessage);
await chat.sendMessage({ text: "And its colour?" });
await settled(chat);
const second = text(chat.lastMessage);
const sentParts = sent[0].messages.at(-1).parts;
console.log(JSON.stringify({ sentParts, first, second, status: chat.status, errors }));
