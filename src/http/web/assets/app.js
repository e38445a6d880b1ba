// agentd's web page: the chat and the runs console. It speaks only agentd's public API and
// writes what a model says as text (textContent); the only HTML it inserts is what
// POST /v1/markdown rendered and cleaned on the server. No framework, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORE = "agentd.key";
const USER_STORE = "agentd.user";
const ACTIVE_STORE = "agentd.activeRun";
const CONVERSATION_STORE = "agentd.conversation";
const DEFAULT_USER = "local";

const state = {
  key: localStorage.getItem(KEY_STORE) || "",
  user: localStorage.getItem(USER_STORE) || "",
  me: null,
  agents: [],
  conversationId: null,
  active: null, // {runId, conversationId, seq, events: [[kind, data]]}
  controller: null,
};

class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const bearer = state.key || (window.agentdSignIn ? window.agentdSignIn.token() : "");
  if (bearer) h["Authorization"] = "Bearer " + bearer;
  return h;
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  if (opts.json !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(opts.json);
    delete opts.json;
  }
  let response;
  try {
    response = await fetch(path, opts);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network");
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

async function errorOf(response) {
  let message = response.statusText;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (_) { /* not JSON */ }
  return new ApiError(response.status, message, response.headers.get("Retry-After"));
}

// Every failure in words, with what to do about it.
function describe(error) {
  if (!(error instanceof ApiError)) return "Something went wrong: " + (error && error.message ? error.message : error);
  const wait = error.retryAfter ? ` Try again in ${error.retryAfter} s.` : " Try again in a moment.";
  switch (error.status) {
    case 0: return "The connection to agentd dropped. Check that the server is running and reachable, then reload the page.";
    case 401: return state.key
      ? "The API key was refused (401): enter a valid key above and press Connect."
      : "This server needs an API key (401): enter yours above and press Connect.";
    case 403: return "This API key may not do that (403): " + error.message;
    case 404: return "Not found (404): " + error.message;
    case 413: return "That message is too large (413): shorten it.";
    case 429: return "Too many requests (429): " + error.message + "." + wait;
    case 503: return "agentd is busy or restarting (503): " + error.message + "." + wait;
    default: return `The request failed (${error.status}): ${error.message}`;
  }
}

function notify(text, kind) {
  const box = $("notice");
  if (!text) { box.hidden = true; box.textContent = ""; return; }
  box.hidden = false;
  box.className = "notice" + (kind === "info" ? " info" : "");
  box.textContent = text;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function userId() {
  return (state.me && state.me.user_id) || state.user.trim();
}

// ---------- start-up ----------

async function connect() {
  notify("");
  state.key = $("key").value.trim();
  localStorage.setItem(KEY_STORE, state.key);
  state.user = $("user").value.trim();
  localStorage.setItem(USER_STORE, state.user);
  try {
    state.me = await (await api("/v1/me")).json();
  } catch (error) {
    state.me = null;
    notify(describe(error));
    return;
  }
  $("user-field").hidden = !!state.me.user_id;
  $("tab-runs").hidden = !state.me.admin;
  if (!userId()) {
    // A key bound to no user (or no key on a loopback server): chat as `local` until a name
    // is entered, so the first visit works at once.
    state.user = DEFAULT_USER;
    $("user").value = DEFAULT_USER;
  }
  await loadAgents();
  await loadConversations();
  if (!(await resumeActiveRun())) {
    const current = sessionStorage.getItem(CONVERSATION_STORE);
    if (current && !state.conversationId) await openConversation(current);
  }
}

async function loadAgents() {
  try {
    const list = await (await api("/v1/agents")).json();
    state.agents = list.data.map((a) => a.name || a.id);
  } catch (error) {
    notify(describe(error));
    return;
  }
  for (const select of [$("agent"), $("filter-agent")]) {
    const keep = select.id === "filter-agent" ? [select.options[0]] : [];
    select.replaceChildren(...keep);
    for (const name of state.agents) select.append(new Option(name, name));
  }
  if (state.agents.includes("chat")) $("agent").value = "chat";
}

async function loadConversations() {
  const list = $("conversations");
  let page;
  try {
    page = await (await api(`/api/${encodeURIComponent(userId())}/conversations?limit=100`)).json();
  } catch (error) {
    notify(describe(error));
    return;
  }
  list.replaceChildren();
  for (const c of page.data) {
    const item = el("li");
    const button = el("button", c.id === state.conversationId ? "current" : "", c.title || "(untitled)");
    button.type = "button";
    button.title = `${c.agent} · ${new Date(c.updated_at).toLocaleString()}`;
    button.dataset.id = c.id;
    button.addEventListener("click", () => openConversation(c.id));
    item.append(button);
    list.append(item);
  }
}

async function openConversation(id) {
  if (state.active) return notify("Wait for the answer to finish, or press Stop.", "info");
  notify("");
  state.conversationId = id;
  sessionStorage.setItem(CONVERSATION_STORE, id);
  const messages = $("messages");
  messages.replaceChildren();
  let detail;
  try {
    detail = await (await api(`/api/${encodeURIComponent(userId())}/conversations/${encodeURIComponent(id)}`)).json();
  } catch (error) {
    notify(describe(error));
    return;
  }
  if (state.agents.includes(detail.agent)) $("agent").value = detail.agent;
  for (const m of detail.messages) {
    if (m.role === "user" && m.content) messages.append(el("div", "message user", m.content));
    if (m.role === "assistant" && m.content) {
      const box = el("div", "message assistant");
      const text = el("div", "text", m.content);
      box.append(text);
      messages.append(box);
      renderMarkdown(text);
    }
  }
  for (const b of document.querySelectorAll(".conversations button")) {
    b.classList.toggle("current", b.dataset.id === id);
  }
}

function newChat() {
  if (state.active) return notify("Wait for the answer to finish, or press Stop.", "info");
  state.conversationId = null;
  sessionStorage.removeItem(CONVERSATION_STORE);
  $("messages").replaceChildren();
  for (const b of document.querySelectorAll(".conversations button")) b.classList.remove("current");
  $("prompt").focus();
}

// ---------- sending and streaming ----------

async function send(event) {
  event.preventDefault();
  const text = $("prompt").value;
  if (!text.trim()) return;
  if (!userId()) return notify("Enter a user name first.", "info");
  if (state.active) return;
  notify("");
  $("messages").append(el("div", "message user", text));
  $("prompt").value = "";
  const body = { message: text, stream: true, on_disconnect: "continue" };
  if (state.conversationId) body.conversation_id = state.conversationId;
  else body.agent = $("agent").value || undefined;
  const view = new AnswerView();
  setBusy(true);
  state.controller = new AbortController();
  let response;
  try {
    response = await api(`/api/${encodeURIComponent(userId())}/chat`, {
      method: "POST", json: body, signal: state.controller.signal,
    });
  } catch (error) {
    view.fail(describe(error));
    setBusy(false);
    return;
  }
  state.active = {
    runId: response.headers.get("x-agentd-run-id"),
    conversationId: response.headers.get("x-agentd-conversation-id"),
    seq: 0,
    events: [],
  };
  state.conversationId = state.active.conversationId;
  if (state.conversationId) sessionStorage.setItem(CONVERSATION_STORE, state.conversationId);
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
  finishActive();
}

async function readFrames(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      if (e.name === "AbortError") throw e;
      return finished;
    }
    if (chunk.done) return finished;
    buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = null, kind = "message", data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) id = Number(line.slice(3).trim());
        else if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      let parsed;
      try { parsed = JSON.parse(data.join("\n")); } catch (_) { continue; }
      onEvent(id === null ? 0 : id, kind, parsed);
      if (kind === "run.finished") finished = true;
    }
  }
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

function finishActive() {
  state.active = null;
  state.controller = null;
  saveActive();
  setBusy(false);
  loadConversations();
}

// After a reload mid-answer: show what was already received, then continue after it. True
// when there was an answer to resume.
async function resumeActiveRun() {
  if (state.active) return true; // already following it
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

async function stop() {
  if (!state.active) return;
  try {
    await api(`/v1/runs/${encodeURIComponent(state.active.runId)}/cancel`, { method: "POST", json: { mode: "abort" } });
  } catch (error) {
    notify(describe(error));
  }
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").hidden = !busy;
}

// One assistant answer: text, thinking, tools, progress, approvals and the footer.
class AnswerView {
  constructor() {
    this.box = el("div", "message assistant");
    $("messages").append(this.box);
    this.text = null;
    this.thinking = null;
    this.progress = null;
    this.tools = new Map();
    this.runId = null;
  }

  apply(kind, data) {
    switch (kind) {
      case "run.started": this.runId = data.run_id; break;
      case "turn.started": this.text = null; this.thinking = null; break;
      case "output": this.appendText(data); break;
      case "thinking": this.appendThinking(data); break;
      case "progress": this.addProgress(data); break;
      case "tool.started": this.toolStarted(data); break;
      case "tool.finished": this.toolFinished(data); break;
      case "tool.approval_requested": this.approvalRequested(data); break;
      case "tool.approval_decided": this.approvalDecided(data); break;
      case "error": this.box.append(el("div", "error-text", "Error: " + data.message)); break;
      case "run.finished": this.finished(data); break;
      default: break;
    }
    this.box.scrollIntoView({ block: "end" });
  }

  appendText(data) {
    this.thinking = null;
    if (!this.text) {
      this.text = el("div", "text");
      this.box.append(this.text);
    }
    if (data.replace) this.text.textContent = data.text;
    else this.text.textContent += data.text;
  }

  appendThinking(data) {
    if (!this.thinking) {
      const details = el("details", "thinking");
      details.append(el("summary", "", "Thinking"));
      this.thinking = el("pre");
      details.append(this.thinking);
      this.box.append(details);
      this.text = null;
    }
    this.thinking.textContent += data.text;
  }

  addProgress(data) {
    if (!this.progress) {
      this.progress = el("ul", "progress");
      this.box.append(this.progress);
    }
    const what = data.message || data.now || data.kind.replace("agent_", "");
    const extra = data.done ? ` (done: ${data.done})` : "";
    this.progress.append(el("li", "", `${data.agent}: ${what}${extra}`));
  }

  toolStarted(data) {
    this.text = null;
    this.thinking = null;
    const details = el("details", "tool");
    details.dataset.call = data.call_id;
    const summary = el("summary", "", `Tool ${data.tool} — running…`);
    details.append(summary);
    details.append(el("div", "label", "Arguments"));
    details.append(el("pre", "arguments", JSON.stringify(data.arguments, null, 2)));
    const result = el("div", "result");
    details.append(result);
    this.box.append(details);
    this.tools.set(data.call_id, { summary, result, tool: data.tool });
  }

  toolFinished(data) {
    const tool = this.tools.get(data.call_id);
    if (!tool) return;
    const ok = data.status === "ok";
    tool.summary.textContent = `Tool ${data.tool} — ${ok ? "done" : "failed"} in ${data.latency_ms} ms`;
    tool.result.append(el("div", "label", ok ? "Result" : "Error"));
    const shown = ok ? data.output : (data.error || data.output || "failed");
    tool.result.append(el("pre", "output", shown + (data.output_truncated ? "\n… (cut)" : "")));
  }

  approvalRequested(data) {
    const box = el("div", "approval");
    box.dataset.call = data.call_id;
    box.append(el("div", "", `The agent wants to run ${data.tool}. Approve it?`));
    const args = el("textarea");
    args.rows = 4;
    args.value = JSON.stringify(data.arguments, null, 2);
    box.append(args);
    const reason = el("input");
    reason.placeholder = "reason (optional)";
    box.append(reason);
    const buttons = el("div", "buttons");
    const approve = el("button", "approve", "Approve");
    const deny = el("button", "deny", "Deny");
    approve.type = deny.type = "button";
    buttons.append(approve, deny);
    box.append(buttons);
    const status = el("div", "approval-status");
    box.append(status);
    const decide = async (decision) => {
      const body = { decision };
      if (reason.value.trim()) body.reason = reason.value.trim();
      if (decision === "approve") {
        try {
          const edited = JSON.parse(args.value);
          if (JSON.stringify(edited) !== JSON.stringify(data.arguments)) body.arguments = edited;
        } catch (_) {
          status.textContent = "The arguments are not valid JSON: fix them or deny.";
          return;
        }
      }
      try {
        await api(`/v1/runs/${encodeURIComponent(this.runId || (state.active && state.active.runId))}/approvals/${encodeURIComponent(data.call_id)}`, { method: "POST", json: body });
        status.textContent = decision === "approve" ? "Approved." : "Denied.";
        approve.disabled = deny.disabled = true;
      } catch (error) {
        status.textContent = error.status === 404 || error.status === 405
          ? "This server cannot take approvals yet (" + error.message + ")."
          : describe(error);
      }
    };
    approve.addEventListener("click", () => decide("approve"));
    deny.addEventListener("click", () => decide("deny"));
    this.box.append(box);
    this.text = null;
  }

  approvalDecided(data) {
    for (const box of this.box.querySelectorAll(".approval")) {
      if (box.dataset.call !== data.call_id) continue;
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      box.querySelector(".approval-status").textContent = `Decision: ${data.decision}` + (data.reason ? ` (${data.reason})` : "");
    }
  }

  finished(data) {
    const usage = data.usage || {};
    const cost = typeof data.cost_usd === "number" ? `$${data.cost_usd.toFixed(4)}` : "";
    const seconds = data.duration_ms ? `${(data.duration_ms / 1000).toFixed(1)} s` : "";
    const parts = [
      `${usage.total_tokens || 0} tokens (${usage.input_tokens || 0} in, ${usage.output_tokens || 0} out)`,
      cost, seconds, data.status === "completed" ? "" : data.status,
    ].filter(Boolean);
    this.box.append(el("div", "footer", parts.join(" · ")));
    if (data.status === "failed") {
      this.fail(`The answer failed (${data.exit_reason}): ${data.error || "no details"}.` + advice(data.exit_reason));
    } else if (data.status === "cancelled") {
      this.box.append(el("div", "error-text", "Stopped."));
    }
    for (const text of this.box.querySelectorAll(".text")) renderMarkdown(text);
  }

  fail(message) {
    this.box.append(el("div", "error-text", message));
  }
}

function advice(exitReason) {
  switch (exitReason) {
    case "rate_limited": return " The model provider is rate limiting: try again in a moment.";
    case "llm_error": case "no_llm_response": case "auth_failure": case "quota_exceeded":
    case "output_too_large":
      return " The model provider failed: try again, or ask the operator to check the provider.";
    case "max_turns": case "context_limit": return " Try breaking the request into smaller steps.";
    case "shutting_down": return " The server is restarting: try again shortly.";
    default: return "";
  }
}

// A finished answer's Markdown, rendered and cleaned by the server; the text stays if that fails.
async function renderMarkdown(node) {
  const text = node.textContent;
  if (!text.trim()) return;
  try {
    const answer = await (await api("/v1/markdown", { method: "POST", json: { text } })).json();
    const html = new DOMParser().parseFromString(answer.html, "text/html");
    node.replaceChildren(...html.body.childNodes);
    node.classList.add("rendered");
  } catch (_) { /* plain text it is */ }
}

// ---------- runs console ----------

function showTab(name) {
  $("chat-view").hidden = name !== "chat";
  $("runs-view").hidden = name !== "runs";
  $("tab-chat").classList.toggle("active", name === "chat");
  $("tab-runs").classList.toggle("active", name === "runs");
  if (name === "runs") loadRuns();
}

async function loadRuns(event) {
  if (event) event.preventDefault();
  const query = new URLSearchParams({ limit: "100" });
  if ($("filter-status").value) query.set("status", $("filter-status").value);
  if ($("filter-agent").value) query.set("agent", $("filter-agent").value);
  if ($("filter-user").value.trim()) query.set("user", $("filter-user").value.trim());
  let page;
  try {
    page = await (await api("/v1/runs?" + query)).json();
  } catch (error) {
    notify(describe(error));
    return;
  }
  notify("");
  const body = $("run-table").tBodies[0];
  body.replaceChildren();
  for (const run of page.data) {
    const row = el("tr");
    row.dataset.run = run.run_id;
    const cells = [
      new Date(run.created_at).toLocaleString(),
      run.status,
      run.agent,
      run.user_id || "—",
      run.duration_ms === null ? "…" : `${(run.duration_ms / 1000).toFixed(1)} s`,
      String(run.input_tokens + run.output_tokens),
      `$${run.cost_usd.toFixed(4)}`,
    ];
    cells.forEach((text, i) => row.append(el("td", i === 1 ? "status-" + run.status : "", text)));
    row.addEventListener("click", () => openTimeline(run));
    body.append(row);
  }
  if (!page.data.length) {
    const row = el("tr");
    const cell = el("td", "", "No runs match.");
    cell.colSpan = 7;
    row.append(cell);
    body.append(row);
  }
}

let timelineController = null;
async function openTimeline(run) {
  if (timelineController) timelineController.abort();
  timelineController = new AbortController();
  $("timeline").hidden = false;
  $("timeline-title").textContent = `Run ${run.run_id} · ${run.agent} · ${run.status}`;
  const list = $("timeline-events");
  list.replaceChildren();
  try {
    const response = await api(`/v1/runs/${encodeURIComponent(run.run_id)}/events`, { signal: timelineController.signal });
    await readFrames(response, (seq, kind, data) => {
      list.append(el("li", "", `${seq} ${kind} ${summarize(kind, data)}`));
    });
  } catch (error) {
    if (error.name !== "AbortError") list.append(el("li", "error-text", describe(error)));
  }
}

function summarize(kind, data) {
  switch (kind) {
    case "output": case "thinking": return JSON.stringify(data.text);
    case "tool.started": return `${data.tool} ${JSON.stringify(data.arguments)}`;
    case "tool.finished": return `${data.tool} ${data.status} ${data.latency_ms} ms`;
    case "run.finished": return `${data.status} ${data.exit_reason} ${data.usage ? data.usage.total_tokens : 0} tokens $${data.cost_usd}`;
    default: {
      const text = JSON.stringify(data);
      return text.length > 200 ? text.slice(0, 200) + "…" : text;
    }
  }
}

// ---------- wiring ----------

document.addEventListener("DOMContentLoaded", () => {
  $("key").value = state.key;
  $("user").value = state.user;
  $("connect").addEventListener("click", connect);
  $("key").addEventListener("keydown", (e) => { if (e.key === "Enter") connect(); });
  $("user").addEventListener("keydown", (e) => { if (e.key === "Enter") connect(); });
  $("new-chat").addEventListener("click", newChat);
  $("composer").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("stop").addEventListener("click", stop);
  $("tab-chat").addEventListener("click", () => showTab("chat"));
  $("tab-runs").addEventListener("click", () => showTab("runs"));
  $("run-filters").addEventListener("submit", loadRuns);
  window.addEventListener("pagehide", saveActive);
  (window.agentdSignIn ? window.agentdSignIn.start() : Promise.resolve()).then(connect);
});
