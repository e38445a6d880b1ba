// The runs console: filters (status, agent, user, conversation), paging by the API's cursor,
// and a run's detail beside the list (over it on a phone): facts, the result, the accounting,
// and its events as a readable timeline. A run links to its conversation and back.
import { api, apiJson, describe, readFrames } from "./api.js";
import { $, el, formatCost, formatDuration, formatTime } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { notify } from "./ui.js";

const PAGE_SIZE = 25;
const pages = { stack: [], current: null, next: null };
let detailController = null;

export function setRunFilter(conversationId, user) {
  $("filter-conversation").value = conversationId || "";
  $("filter-user").value = user || "";
}

export async function loadRuns(event, where) {
  if (event) event.preventDefault();
  if (where === undefined) { pages.stack = []; pages.current = null; }
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if ($("filter-status").value) query.set("status", $("filter-status").value);
  if ($("filter-agent").value) query.set("agent", $("filter-agent").value);
  if ($("filter-user").value.trim()) query.set("user", $("filter-user").value.trim());
  if ($("filter-conversation").value.trim()) query.set("conversation_id", $("filter-conversation").value.trim());
  if (pages.current) query.set("after", pages.current);
  let page;
  try {
    page = await apiJson("/v1/runs?" + query);
  } catch (error) {
    notify(describe(error));
    return;
  }
  notify("");
  pages.next = page.next;
  const body = $("run-table").tBodies[0];
  body.replaceChildren();
  for (const run of page.data) body.append(runRow(run));
  if (!page.data.length) {
    const row = el("tr", "empty");
    const cell = el("td", "", "No runs match.");
    cell.colSpan = 7;
    row.append(cell);
    body.append(row);
  }
  $("runs-prev").disabled = pages.stack.length === 0;
  $("runs-next").disabled = !pages.next;
  $("runs-page").textContent = `Page ${pages.stack.length + 1}`;
}

export function olderRuns() {
  if (!pages.next) return;
  pages.stack.push(pages.current);
  pages.current = pages.next;
  loadRuns(null, "older");
}

export function newerRuns() {
  if (!pages.stack.length) return;
  pages.current = pages.stack.pop();
  loadRuns(null, "newer");
}

function runRow(run) {
  const row = el("tr");
  row.dataset.run = run.run_id;
  const open = el("a", "open-run", formatTime(run.created_at));
  open.href = `#run=${encodeURIComponent(run.run_id)}`;
  open.setAttribute("aria-label", `Run of ${run.agent}, ${run.status}, ${formatTime(run.created_at)}`);
  const first = el("td", "started");
  first.append(open);
  row.append(first);
  const cells = [
    ["status", run.status, "status-" + run.status],
    ["agent", run.agent],
    ["user", run.user_id || "—"],
    ["duration", run.duration_ms === null || run.duration_ms === undefined ? "…" : formatDuration(run.duration_ms)],
    ["tokens", String(run.input_tokens + run.output_tokens)],
    ["cost", formatCost(run.cost_usd)],
  ];
  for (const [name, text, extra] of cells) {
    const cell = el("td", name + (extra ? " " + extra : ""), text);
    cell.dataset.label = name;
    row.append(cell);
  }
  row.addEventListener("click", (e) => { if (e.target.tagName !== "A") location.hash = open.getAttribute("href"); });
  return row;
}

function fact(list, name, value) {
  if (value === null || value === undefined || value === "") return;
  list.append(el("dt", "", name));
  const dd = el("dd");
  if (value instanceof Node) dd.append(value); else dd.textContent = value;
  list.append(dd);
}

export async function openRun(runId) {
  if (detailController) detailController.abort();
  detailController = new AbortController();
  const signal = detailController.signal;
  document.body.classList.add("run-open");
  $("run-detail").hidden = false;
  $("run-detail-title").textContent = `Run ${runId}`;
  for (const id of ["run-facts", "run-result", "run-accounting", "timeline-events"]) $(id).replaceChildren();
  for (const row of document.querySelectorAll("#run-table tbody tr")) row.classList.toggle("selected", row.dataset.run === runId);
  $("run-detail-close").focus();
  let run;
  try {
    run = await apiJson(`/v1/runs/${encodeURIComponent(runId)}`, { signal });
  } catch (error) {
    if (error.name !== "AbortError") $("run-result").append(el("p", "error-text", describe(error)));
    return;
  }
  showFacts(run);
  showResult(run.result);
  await showTimeline(runId, signal);
}

function showFacts(run) {
  const facts = $("run-facts");
  $("run-detail-title").textContent = `${run.agent} · ${run.status}`;
  fact(facts, "Run", run.run_id);
  fact(facts, "Started", formatTime(run.created_at));
  fact(facts, "Duration", run.duration_ms === null ? "still running" : formatDuration(run.duration_ms));
  fact(facts, "Exit", run.exit_reason);
  const result = run.result || {};
  if (result.usage) fact(facts, "Tokens", `${result.usage.total_tokens} (${result.usage.input_tokens} in, ${result.usage.output_tokens} out, ${result.usage.cached_tokens} cached)`);
  if (typeof result.cost_usd === "number") fact(facts, "Cost", formatCost(result.cost_usd));
  if (result.turns) fact(facts, "Turns", String(result.turns));
  if (run.conversation_id) {
    const link = el("a", "conversation-link", "Open the conversation");
    link.href = `#conversation=${encodeURIComponent(run.conversation_id)}`;
    fact(facts, "Conversation", link);
  }
}

// One accounting entry (contract §4, camelCase) as table cells.
function accountingCells(entry) {
  const tokens = entry.tokens || {};
  const total = tokens.totalTokens ?? ((tokens.inputTokens || 0) + (tokens.outputTokens || 0));
  const isTool = entry.type === "tool";
  return [
    entry.type || "",
    isTool ? [entry.mcpServer, entry.command].filter(Boolean).join(" · ") : [entry.provider, entry.model].filter(Boolean).join("/"),
    isTool ? `${entry.charactersIn ?? 0} → ${entry.charactersOut ?? 0} chars` : `${total} (${tokens.inputTokens || 0} in, ${tokens.outputTokens || 0} out)`,
    formatCost(entry.costUsd),
    formatDuration(entry.latency),
    entry.status || "",
  ];
}

function showResult(result) {
  const box = $("run-result");
  if (!result) { box.append(el("p", "muted", "No result yet: the run has not finished.")); return; }
  const report = result.final_report || {};
  if (result.error) box.append(el("p", "error-text", result.error));
  if (report.content) {
    const text = el("div", "text rendered");
    text.append(renderMarkdown(report.content));
    box.append(text);
  } else if (report.content_json !== undefined) {
    box.append(el("pre", "", JSON.stringify(report.content_json, null, 2)));
  } else if (!result.error) {
    box.append(el("p", "muted", "No answer."));
  }
  const entries = result.accounting || [];
  const accounting = $("run-accounting");
  if (!entries.length) { accounting.append(el("p", "muted", "Nothing was used.")); return; }
  const table = el("table", "accounting");
  const head = el("tr");
  for (const name of ["Kind", "What", "Used", "Cost", "Time", "Status"]) head.append(el("th", "", name));
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  for (const entry of entries) {
    const row = el("tr");
    for (const text of accountingCells(entry)) row.append(el("td", "", text));
    tbody.append(row);
  }
  table.append(thead, tbody);
  const wrap = el("div", "table-scroll");
  wrap.tabIndex = 0;
  wrap.setAttribute("aria-label", "Accounting");
  wrap.append(table);
  accounting.append(wrap);
}

// A run's events as people read them: text runs joined, tools with their outcome.
async function showTimeline(runId, signal) {
  const list = $("timeline-events");
  let textItem = null, textKind = null;
  const add = (kind, title, detail) => {
    const item = el("li", "event event-" + kind.replace(/\./g, "-"));
    item.append(el("span", "event-kind", title));
    if (detail) item.append(el("span", "event-detail", detail));
    list.append(item);
    return item;
  };
  try {
    const response = await api(`/v1/runs/${encodeURIComponent(runId)}/events`, { signal });
    await readFrames(response, (seq, kind, data) => {
      if ((kind === "output" || kind === "thinking") && textKind === kind && textItem) {
        textItem.querySelector(".event-detail").textContent += data.text;
        return;
      }
      textItem = null; textKind = null;
      switch (kind) {
        case "run.started": add(kind, "Run started", `${data.agent}${data.conversation_id ? " · conversation " + data.conversation_id : ""}`); break;
        case "turn.started": add(kind, `Turn ${data.turn}`, data.is_retry ? `retry (attempt ${data.attempt})` : (data.is_final_turn ? "final turn" : "")); break;
        case "output": textItem = add(kind, "Answer text", data.text); textKind = kind; break;
        case "thinking": textItem = add(kind, "Thinking", data.text); textKind = kind; break;
        case "tool.started": add(kind, `Tool ${data.tool} called`, JSON.stringify(data.arguments)); break;
        case "tool.finished": add(kind, `Tool ${data.tool} ${data.status === "ok" ? "returned" : "failed"}`, `${formatDuration(data.latency_ms)}${data.error ? " · " + data.error : ""}`); break;
        case "tool.approval_requested": add(kind, `Approval asked for ${data.tool}`, JSON.stringify(data.arguments)); break;
        case "tool.approval_decided": add(kind, `Approval: ${data.decision}`, data.by ? `by ${data.by}${data.reason ? " · " + data.reason : ""}` : ""); break;
        case "progress": add(kind, `Sub-agent ${data.agent}`, data.message || data.now || data.kind); break;
        case "accounting": { const [type, what, amount, cost, took] = accountingCells(data); add(kind, `Accounting (${type})`, [what, amount, cost, took].filter(Boolean).join(" · ")); break; }
        case "error": add(kind, "Error", data.message); break;
        case "run.finished": add(kind, `Run finished: ${data.status}`, `${data.exit_reason} · ${data.usage ? data.usage.total_tokens : 0} tokens · ${formatCost(data.cost_usd)} · ${formatDuration(data.duration_ms)}`); break;
        default: add(kind, kind, JSON.stringify(data).slice(0, 200));
      }
    });
  } catch (error) {
    if (error.name !== "AbortError") list.append(el("li", "error-text", describe(error)));
  }
}

export function closeRun() {
  if (detailController) detailController.abort();
  document.body.classList.remove("run-open");
  $("run-detail").hidden = true;
  const selected = document.querySelector("#run-table tr.selected .open-run");
  if (location.hash.startsWith("#run=")) history.replaceState(null, "", "#runs");
  if (selected) selected.focus();
}

