// The places later features plug into the page, each named after its SPEC section. A feature
// registers itself with `hooks.register(name, implementation)` from its own module imported in
// main.js; with nothing registered every hook does nothing and the page works as it is.
//
//   signin       (§12) mount(slot) in the header's #signin-slot; authorize() → request headers
//                (e.g. a Bearer token) replacing the API key; user() → the signed-in user id.
//   attachments  (§11) mount(slot) in the composer's #attachments-slot; collect() → a promise of
//                the files to send ({file_id, name, media_type, bytes} each; empty: none);
//                clear() after sending; show(files) → the node showing a message's files;
//                count() → how many files are pending (a message of files alone is sent).
//   queue        (§13) sendWhileBusy(text, files) → true when the message (and its files) was
//                sent and is shown as queued (render it with showQueued(text, files) /
//                clearQueued()); answerFinished()
//                when the answer in progress ended (the queued one's answer follows).
//   schedules    (§13) mount(view) in #schedules-view, shown by the Schedules tab; show() (re)loads
//                it.
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
  const schedules = hooks.get("schedules");
  if (schedules && schedules.mount) {
    $("tab-schedules").hidden = false;
    schedules.mount($("schedules-view"));
  }
  const usage = hooks.get("usage");
  if (usage && usage.mount) {
    $("tab-usage").hidden = false;
    usage.mount($("usage-view"));
  }
}

// The files the attachments hook has ready for the next message (none without the hook).
export async function pendingAttachments() {
  const attachments = hooks.get("attachments");
  const list = attachments && attachments.collect ? await attachments.collect() : [];
  return list || [];
}

// Whether the attachments hook holds files for the next message (uploaded or uploading).
export function hasPendingAttachments() {
  const attachments = hooks.get("attachments");
  return Boolean(attachments && attachments.count && attachments.count() > 0);
}

// The chat request's `attachments` for a message's files: each named by its `file_id`.
export function attachmentFields(files) {
  return files && files.length ? { attachments: files.map((f) => ({ file_id: f.file_id })) } : {};
}

// The node showing a message's files, or null (no files, or no hook).
export function showAttachments(files) {
  const attachments = hooks.get("attachments");
  return attachments && attachments.show && files && files.length ? attachments.show(files) : null;
}

export function clearAttachments() {
  const attachments = hooks.get("attachments");
  if (attachments && attachments.clear) attachments.clear();
}

// A message shown as queued behind the answer in progress (§13).
export function showQueued(text, files) {
  const box = $("queued");
  box.replaceChildren(el("span", "queued-label", "Queued"), el("span", "queued-text", text));
  const shown = showAttachments(files);
  if (shown) box.append(shown);
  box.hidden = false;
}

export function clearQueued() {
  $("queued").hidden = true;
  $("queued").replaceChildren();
}
