// The places later features plug into the page, each named after its SPEC section. A feature
// registers itself with `hooks.register(name, implementation)` from its own module imported in
// main.js; with nothing registered every hook does nothing and the page works as it is.
//
//   signin       (§12) mount(slot) in the header's #signin-slot; authorize() → request headers
//                (e.g. a Bearer token) replacing the API key; user() → the signed-in user id.
//   attachments  (§11) mount(slot) in the composer's #attachments-slot; collect() → the
//                `attachments` array added to the chat request (empty: none); clear() after sending.
//   queue        (§13) sendWhileBusy(text) → true when the message was sent and is shown as
//                queued (render it with showQueued(text) / clearQueued()); answerFinished()
//                when the answer in progress ended (the queued one's answer follows).
//   usage        (§14) mount(view) in #usage-view, shown by the Usage tab; show() (re)loads it.
import { $, el } from "./dom.js";

const registered = new Map();

export const hooks = {
  register(name, implementation) {
    registered.set(name, implementation);
  },
  get(name) {
    return registered.get(name) || null;
  },
};

export function mountHooks() {
  const signin = hooks.get("signin");
  if (signin && signin.mount) signin.mount($("signin-slot"));
  const attachments = hooks.get("attachments");
  if (attachments && attachments.mount) {
    $("attachments-slot").hidden = false;
    attachments.mount($("attachments-slot"));
  }
  const usage = hooks.get("usage");
  if (usage && usage.mount) {
    $("tab-usage").hidden = false;
    usage.mount($("usage-view"));
  }
}

// The request fields the attachments hook adds to a chat message.
export function attachmentFields() {
  const attachments = hooks.get("attachments");
  const list = attachments && attachments.collect ? attachments.collect() : [];
  return list && list.length ? { attachments: list } : {};
}

export function clearAttachments() {
  const attachments = hooks.get("attachments");
  if (attachments && attachments.clear) attachments.clear();
}

// A message shown as queued behind the answer in progress (§13).
export function showQueued(text) {
  const box = $("queued");
  box.replaceChildren(el("span", "queued-label", "Queued"), el("span", "queued-text", text));
  box.hidden = false;
}

export function clearQueued() {
  $("queued").hidden = true;
  $("queued").replaceChildren();
}
