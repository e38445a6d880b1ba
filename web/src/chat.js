// Sending a message and following its answer: the run's events stream into an AnswerView; a
// dropped stream or a reload mid-answer resumes after the last event seen (Last-Event-ID); Stop
// cancels the run. Edit and Regenerate send `replace_from` (the stored number of the user
// message): the server rewinds the conversation to just before it and answers the new text.
import { api, ApiError, describe, readFrames, state, userId, userPath } from "./api.js";
import { AnswerView, followBottom } from "./answer.js";
import { answerActions, loadConversations, numberMessages, openConversation, setThreadHead, userBubble } from "./conversations.js";
import { $, button, el } from "./dom.js";
import { attachmentFields, clearAttachments, hasPendingAttachments, hooks, pendingAttachments } from "./hooks.js";
import { notify } from "./ui.js";

const ACTIVE_STORE = "agentd.activeRun";
let collecting = false;

export async function send(event) {
  if (event) event.preventDefault();
  const text = $("prompt").value;
  // Files alone make a message (an image to describe); nothing at all sends nothing.
  if (!text.trim() && !hasPendingAttachments()) return;
  if (!userId()) return notify("Enter a user name under Key first.", "info");
  if (collecting) return;
  if (state.active) return sendQueued(text);
  notify("");
  // Uploads still in progress end first; a second Enter meanwhile sends nothing twice.
  collecting = true;
  $("send").disabled = true;
  const files = await pendingAttachments();
  $("send").disabled = false;
  collecting = false;
  // Every file was refused while it uploaded: with no text either, there is nothing to send.
  if (!text.trim() && !files.length) return;
  const bubble = userBubble(text, undefined, files);
  $("messages").append(bubble);
  if (!state.conversationId) $("thread-title").textContent = text.trim().slice(0, 60) || files.map((f) => f.name).join(", ");
  $("prompt").value = "";
  await startAnswer({ message: text }, bubble);
}

// Starts a run for `fields` (message, replace_from) with the files of `bubble` and follows it;
// the answer goes after `bubble`.
async function startAnswer(fields, bubble) {
  const body = Object.assign({ stream: true, on_disconnect: "continue" }, fields, attachmentFields(bubble.files));
  if (state.conversationId) body.conversation_id = state.conversationId;
  else body.agent = $("agent").value || undefined;
  const view = new AnswerView(bubble);
  followBottom(true);
  setBusy(true);
  state.controller = new AbortController();
  let response;
  try {
    response = await api(userPath("/chat"), { method: "POST", json: body, signal: state.controller.signal });
  } catch (error) {
    view.fail(describe(error));
    setBusy(false);
    state.controller = null;
    return;
  }
  clearAttachments();
  state.active = {
    runId: response.headers.get("x-agentd-run-id"),
    conversationId: response.headers.get("x-agentd-conversation-id"),
    seq: 0,
    events: [],
  };
  state.conversationId = state.active.conversationId;
  if (state.conversationId) sessionStorage.setItem("agentd.conversation", state.conversationId);
  saveActive();
  await follow(response, view);
}

// Reads a run's SSE frames into the view until run.finished; a dropped stream resumes from
// the last event seen (Last-Event-ID).
async function follow(response, view) {
  let finished = false;
  for (let attempt = 0; !finished && attempt < 5; attempt++) {
    try {
      if (!response) {
        response = await api(`/v1/runs/${encodeURIComponent(state.active.runId)}/events`, {
          headers: { "Last-Event-ID": String(state.active.seq) },
          signal: state.controller.signal,
        });
      }
      finished = await readFrames(response, (seq, kind, data) => {
        if (seq <= state.active.seq) return;
        state.active.seq = seq;
        state.active.events.push([kind, data]);
        saveActiveSoon();
        view.apply(kind, data);
      });
    } catch (error) {
      if (error.name === "AbortError") return;
      if (error instanceof ApiError && error.status !== 0) { view.fail(describe(error)); break; }
    }
    response = null;
    if (!finished) await new Promise((r) => setTimeout(r, 500 * (attempt + 1)));
  }
  if (!finished) view.fail(describe(new ApiError(0, "network")));
  answerActions(view.box);
  await finishActive();
}

let saveTimer = null;
function saveActive() {
  if (state.active) sessionStorage.setItem(ACTIVE_STORE, JSON.stringify(state.active));
  else sessionStorage.removeItem(ACTIVE_STORE);
}
function saveActiveSoon() {
  if (saveTimer) return;
  saveTimer = setTimeout(() => { saveTimer = null; saveActive(); }, 100);
}
export function saveActiveNow() { saveActive(); }

async function finishActive() {
  state.active = null;
  state.controller = null;
  saveActive();
  setBusy(false);
  await numberMessages();
  await loadConversations();
  setThreadHead(state.conversation);
  const queue = hooks.get("queue");
  if (queue && queue.answerFinished) await queue.answerFinished();
}

// A message sent while an answer is coming goes to the queue hook (§13) with its files.
async function sendQueued(text) {
  const queue = hooks.get("queue");
  if (!queue) return notify("An answer is still coming: wait for it, or press Stop (Escape).", "info");
  collecting = true;
  const files = await pendingAttachments();
  collecting = false;
  if (!text.trim() && !files.length) return;
  if (await queue.sendWhileBusy(text, files)) {
    $("prompt").value = "";
    clearAttachments();
  }
}

// Follows the answer to a message that waited for its turn (the queue hook, §13).
export async function followQueuedRun(runId, conversationId, text, files) {
  const bubble = userBubble(text, undefined, files);
  $("messages").append(bubble);
  state.active = { runId, conversationId, seq: 0, events: [] };
  state.controller = new AbortController();
  saveActive();
  setBusy(true);
  await follow(null, new AnswerView(bubble));
}

// After a reload mid-answer: show what was already received, then continue after it. True
// when there was an answer to resume.
export async function resumeActiveRun() {
  if (state.active) return true;
  let saved;
  try { saved = JSON.parse(sessionStorage.getItem(ACTIVE_STORE) || "null"); } catch (_) { saved = null; }
  if (!saved || !saved.runId) return false;
  await openConversation(saved.conversationId);
  const view = new AnswerView();
  for (const [kind, data] of saved.events) view.apply(kind, data);
  state.active = saved;
  state.controller = new AbortController();
  setBusy(true);
  follow(null, view);
  return true;
}

export async function stop() {
  if (!state.active) return;
  try {
    await api(`/v1/runs/${encodeURIComponent(state.active.runId)}/cancel`, { method: "POST", json: { mode: "abort" } });
  } catch (error) {
    notify(describe(error));
  }
}

export function setBusy(busy) {
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  $("composer").setAttribute("aria-busy", String(busy));
  if (busy && document.activeElement === $("send")) $("stop").focus();
  if (!busy && document.activeElement === $("stop")) $("prompt").focus();
  for (const control of document.querySelectorAll(".message-actions button")) control.disabled = busy;
}

// Removes every message after `node` from the thread.
function dropAfter(node) {
  while (node.nextElementSibling) node.nextElementSibling.remove();
}

function needsNumber(bubble) {
  if (bubble.dataset.seq) return false;
  notify("That message is not saved yet: reload the conversation, then edit it.", "info");
  return true;
}

export function wireThreadActions() {
  $("messages").addEventListener("click", (event) => {
    const target = event.target.closest("button");
    if (!target || state.active) return;
    const message = target.closest(".message");
    if (target.classList.contains("edit")) editMessage(message);
    if (target.classList.contains("regenerate")) regenerate(message);
  });
}

function regenerate(answer) {
  let bubble = answer.previousElementSibling;
  while (bubble && !bubble.classList.contains("user")) bubble = bubble.previousElementSibling;
  if (!bubble || needsNumber(bubble)) return;
  dropAfter(bubble);
  startAnswer({ message: bubble.dataset.raw, replace_from: Number(bubble.dataset.seq) }, bubble);
}

function editMessage(bubble) {
  if (needsNumber(bubble)) return;
  const form = el("form", "edit-form");
  const label = el("label", "sr-only", "Edit your message");
  const area = el("textarea", "edit-text");
  area.id = `edit-${bubble.dataset.seq}`;
  label.htmlFor = area.id;
  area.value = bubble.dataset.raw;
  area.rows = Math.min(10, Math.max(2, area.value.split("\n").length));
  const save = el("button", "save", "Send edited");
  save.type = "submit";
  const cancel = button("cancel", "Cancel");
  const buttons = el("div", "buttons");
  buttons.append(save, cancel);
  form.append(label, area, buttons);
  const original = Array.from(bubble.childNodes);
  bubble.replaceChildren(form);
  area.focus();
  const restore = () => { bubble.replaceChildren(...original); bubble.querySelector(".edit").focus(); };
  cancel.addEventListener("click", restore);
  area.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); restore(); }
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = area.value;
    if ((!text.trim() && !bubble.files.length) || state.active) return;
    const seq = Number(bubble.dataset.seq);
    const fresh = userBubble(text, undefined, bubble.files);
    bubble.replaceWith(fresh);
    dropAfter(fresh);
    startAnswer({ message: text, replace_from: seq }, fresh);
  });
}
