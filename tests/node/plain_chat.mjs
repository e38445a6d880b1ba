// The AI SDK's own chat (AbstractChat, what useChat wraps) without a UI framework, for the
// scripts that drive agentd's per-user chat as useChat does: a plain-field state, and a wait
// until the chat has settled.
import { AbstractChat } from "ai";

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

/** `AbstractChat` over a [`PlainState`]. */
export class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new PlainState() }); }
}

/** Resolves once `chat` is ready or failed (at most 10 s). */
export async function settled(chat) {
  for (let i = 0; i < 400 && chat.status !== "ready" && chat.status !== "error"; i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
