// The AI SDK's own chat (AbstractChat, what useChat wraps, with a plain state) sending a file
// part (SPEC §11): sendMessage({text, files}) with a PNG as a data URL, as useChat's file input
// builds it, then a second message without files in the same chat. Prints the parts the
// transport sent in its first request, the answers and the chat's status as JSON.
// Usage: AGENTD_KEY=KEY node ai_sdk_files.mjs BASE_URL USER CHAT_ID PNG_BASE64
import { AbstractChat, DefaultChatTransport } from "ai";

const [base, user, chatId, png] = process.argv.slice(2);

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

const settled = async () => {
  for (let i = 0; i < 400 && chat.status !== "ready" && chat.status !== "error"; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};

const text = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

await chat.sendMessage({
  text: "What is in this picture?",
  files: [{ type: "file", mediaType: "image/png", filename: "pixel.png", url: `data:image/png;base64,${png}` }],
});
await settled();
const first = text(chat.lastMessage);
await chat.sendMessage({ text: "And its colour?" });
await settled();
const second = text(chat.lastMessage);
const sentParts = sent[0].messages.at(-1).parts;
console.log(JSON.stringify({ sentParts, first, second, status: chat.status, errors }));
