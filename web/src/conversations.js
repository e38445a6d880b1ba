// The sidebar: the user's conversations (titled after their first message), searched by title,
// renamed in place, deleted with an Undo; a new chat with an agent picker; the open
// conversation's messages with Edit (user messages) and Regenerate / Copy (answers).
import { api, apiJson, describe, state, userId, userPath } from "./api.js";
import { $, button, el, formatCost, formatDuration, formatTime } from "./dom.js";
import { showAttachments } from "./hooks.js";
import { MarkdownView } from "./markdown.js";
import { closeSidebarOnPhone, notify } from "./ui.js";

const UNDO_MS = 6000;
const pendingDeletes = new Map(); // id → timer
let searchTimer = null;
let nextPage = null;

export async function loadConversations(more) {
  const list = $("conversations");
  const query = new URLSearchParams({ limit: "50" });
  const q = $("search").value.trim();
  if (q) query.set("q", q);
  if (more && nextPage) query.set("before", nextPage);
  let page;
  try {
    page = await apiJson(userPath(`/conversations?${query}`));
  } catch (error) {
    notify(describe(error));
    return;
  }
  if (!more) list.replaceChildren();
  for (const c of page.data) {
    if (pendingDeletes.has(c.id)) continue;
    list.append(conversationItem(c));
  }
  nextPage = page.next;
  $("more-conversations").hidden = !page.next;
  $("no-conversations").hidden = list.children.length > 0;
  $("no-conversations").textContent = q ? `No conversation titled “${q}”.` : "No conversations yet.";
}

function conversationItem(c) {
  const item = el("li", "conversation");
  item.dataset.id = c.id;
  const open = button("open", null);
  open.append(el("span", "title", c.title || "(untitled)"), el("span", "meta", `${c.agent} · ${formatTime(c.updated_at)}`));
  if (c.id === state.conversationId) open.setAttribute("aria-current", "true");
  open.addEventListener("click", () => { openConversation(c.id); closeSidebarOnPhone(); });
  const rename = button("icon rename", "✎", `Rename “${c.title || "untitled"}”`);
  rename.addEventListener("click", () => startRename(item, c));
  const remove = button("icon delete", "×", `Delete “${c.title || "untitled"}”`);
  remove.addEventListener("click", () => deleteWithUndo(item, c));
  item.append(open, rename, remove);
  return item;
}

function startRename(item, c) {
  const form = el("form", "rename-form");
  const input = el("input");
  input.value = c.title || "";
  input.maxLength = 200;
  input.setAttribute("aria-label", "New title");
  const save = el("button", "save", "Save");
  save.type = "submit";
  const cancel = button("cancel", "Cancel");
  form.append(input, save, cancel);
  const original = Array.from(item.childNodes);
  item.replaceChildren(form);
  input.focus();
  input.select();
  const restore = () => { item.replaceChildren(...original); item.querySelector(".rename").focus(); };
  cancel.addEventListener("click", restore);
  input.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); restore(); } });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const renamed = await apiJson(userPath(`/conversations/${encodeURIComponent(c.id)}`), { method: "PATCH", json: { title: input.value } });
      const fresh = conversationItem(renamed);
      item.replaceWith(fresh);
      fresh.querySelector(".rename").focus();
      if (renamed.id === state.conversationId) setThreadHead(renamed);
    } catch (error) {
      notify(describe(error));
    }
  });
}

// Hidden at once, deleted when the Undo offer runs out (or the page is left).
function deleteWithUndo(item, c) {
  if (state.active && state.active.conversationId === c.id) return notify("Wait for the answer to finish, or press Stop.", "info");
  const next = item.nextElementSibling || item.previousElementSibling;
  item.remove();
  if (c.id === state.conversationId) newChat();
  const timer = setTimeout(() => commitDelete(c.id), UNDO_MS);
  pendingDeletes.set(c.id, timer);
  const toast = $("toast");
  const undo = button("undo", "Undo");
  toast.replaceChildren(el("span", "", `Deleted “${c.title || "untitled"}”.`), undo);
  toast.hidden = false;
  undo.addEventListener("click", () => {
    clearTimeout(pendingDeletes.get(c.id));
    pendingDeletes.delete(c.id);
    toast.hidden = true;
    loadConversations().then(() => {
      const back = document.querySelector(`.conversation[data-id="${CSS.escape(c.id)}"] .open`);
      if (back) back.focus();
    });
  });
  undo.focus();
  setTimeout(() => { if (toast.contains(undo)) { toast.hidden = true; if (next) { const b = next.querySelector(".open"); if (b) b.focus(); } } }, UNDO_MS);
  $("no-conversations").hidden = $("conversations").children.length > 0;
}

async function commitDelete(id, keepalive) {
  if (!pendingDeletes.has(id)) return;
  pendingDeletes.delete(id);
  try {
    await api(userPath(`/conversations/${encodeURIComponent(id)}`), { method: "DELETE", keepalive: !!keepalive });
  } catch (error) {
    if (!keepalive) notify(describe(error));
  }
}

export function flushDeletes() {
  for (const [id, timer] of pendingDeletes) {
    clearTimeout(timer);
    commitDelete(id, true);
  }
}

export function searchSoon() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => loadConversations(), 250);
}

export function setThreadHead(conversation) {
  state.conversation = conversation;
  $("thread-title").textContent = conversation ? (conversation.title || "(untitled)") : "New chat";
  const agent = conversation ? conversation.agent : ($("agent").value || "chat");
  $("thread-agent").textContent = agent;
  $("thread-agent").title = `Answered by the agent ${agent}`;
  const runs = $("thread-runs");
  runs.hidden = !conversation;
  if (conversation) runs.href = `#runs?conversation=${encodeURIComponent(conversation.id)}`;
  for (const b of document.querySelectorAll(".conversation .open")) {
    if (conversation && b.parentElement.dataset.id === conversation.id) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
}

// A user's message bubble with its files (SPEC §11); `seq` (the stored number) enables Edit.
// The files stay on the bubble (`files`), so an edit or a regenerated answer sends them again.
export function userBubble(text, seq, files) {
  const box = el("article", "message user");
  box.setAttribute("aria-label", "Your message");
  box.dataset.raw = text;
  if (seq) box.dataset.seq = String(seq);
  box.files = files || [];
  const shown = showAttachments(box.files);
  if (shown) box.append(shown);
  box.append(el("div", "text", text));
  const actions = el("div", "message-actions");
  const edit = button("edit", "Edit", "Edit this message");
  actions.append(edit);
  box.append(actions);
  return box;
}

// The actions under an answer: Copy, and Regenerate.
export function answerActions(answerBox) {
  if (answerBox.querySelector(".message-actions")) return;
  const actions = el("div", "message-actions");
  actions.append(button("copy-message", "Copy", "Copy this answer"), button("regenerate", "Regenerate", "Regenerate this answer"));
  answerBox.append(actions);
}

export async function openConversation(id) {
  if (state.active) return notify("Wait for the answer to finish, or press Stop.", "info");
  notify("");
  state.conversationId = id;
  sessionStorage.setItem("agentd.conversation", id);
  const messages = $("messages");
  messages.replaceChildren();
  let detail;
  try {
    detail = await apiJson(userPath(`/conversations/${encodeURIComponent(id)}`));
  } catch (error) {
    notify(describe(error));
    return;
  }
  if (state.agents.includes(detail.agent)) $("agent").value = detail.agent;
  setThreadHead(detail);
  for (const m of detail.messages) {
    if (m.role === "user" && m.content) messages.append(userBubble(m.content, m.seq, m.attachments));
    if (m.role === "assistant" && m.content) {
      const box = el("article", "message assistant");
      box.setAttribute("aria-label", "Answer");
      box.dataset.raw = m.content;
      const body = el("div", "answer-body");
      const text = el("div", "text");
      body.append(text);
      box.append(body);
      messages.append(box);
      new MarkdownView(text).show(m.content);
      box.dataset.createdAt = m.created_at;
      answerActions(box);
    }
  }
  messages.scrollTop = messages.scrollHeight;
  showPastUsage(id);
}

// Tokens, cost and a run link under stored answers: each answer is matched to the completed
// run of the conversation that ended just before it was stored.
async function showPastUsage(id) {
  let page;
  try {
    const query = new URLSearchParams({ conversation_id: id, user: userId(), status: "completed", limit: "200" });
    page = await apiJson(`/v1/runs?${query}`);
  } catch (_) { return; }
  if (state.conversationId !== id) return;
  const runs = page.data.filter((r) => r.finished_at).map((r) => Object.assign({ ended: Date.parse(r.finished_at) }, r));
  for (const box of $("messages").querySelectorAll(".message.assistant[data-created-at]")) {
    if (box.querySelector(".footer")) continue;
    const stored = Date.parse(box.dataset.createdAt);
    let best = null;
    for (const run of runs) {
      const gap = stored - run.ended;
      if (gap >= -2000 && gap <= 30000 && (!best || Math.abs(gap) < Math.abs(stored - best.ended))) best = run;
    }
    if (!best) continue;
    runs.splice(runs.indexOf(best), 1);
    box.querySelector(".answer-body").append(usageFooter(best));
  }
}

function usageFooter(run) {
  const footer = el("div", "footer");
  const parts = [
    `${run.input_tokens + run.output_tokens} tokens (${run.input_tokens} in, ${run.output_tokens} out)`,
    formatCost(run.cost_usd),
    formatDuration(run.duration_ms),
  ].filter(Boolean);
  footer.append(el("span", "usage-line", parts.join(" · ")));
  const link = el("a", "run-link", "Run details");
  link.href = `#run=${encodeURIComponent(run.run_id)}`;
  footer.append(link);
  return footer;
}

export function newChat() {
  if (state.active) return notify("Wait for the answer to finish, or press Stop.", "info");
  state.conversationId = null;
  sessionStorage.removeItem("agentd.conversation");
  $("messages").replaceChildren();
  setThreadHead(null);
  closeSidebarOnPhone();
  $("prompt").focus();
}

// After an answer: numbers the bubbles sent in this session (their `seq` enables Edit).
export async function numberMessages() {
  if (!state.conversationId) return;
  let detail;
  try {
    detail = await apiJson(userPath(`/conversations/${encodeURIComponent(state.conversationId)}`));
  } catch (_) { return; }
  setThreadHead(detail);
  const stored = detail.messages.filter((m) => m.role === "user");
  const bubbles = Array.from($("messages").querySelectorAll(".message.user"));
  const offset = stored.length - bubbles.length;
  bubbles.forEach((b, i) => { const m = stored[i + offset]; if (m) b.dataset.seq = String(m.seq); });
}
