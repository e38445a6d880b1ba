// One assistant answer as it streams: Markdown text, thinking and tool calls (collapsible, with
// arguments, result and duration), live sub-agent progress, approvals (Approve / Deny / edit the
// arguments), and a footer with tokens, cost, time and a link to the run. Files a tool (or a
// sub-agent's tools) gave the model show under its result, like a message's files.
import { api, describe, state } from "./api.js";
import { $, button, el, formatCost, formatDuration } from "./dom.js";
import { showAttachments } from "./hooks.js";
import { MarkdownView } from "./markdown.js";

export function advice(exitReason) {
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

function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch (_) { return value; }
  }
  return JSON.stringify(value, null, 2);
}

export class AnswerView {
  // `after`: insert after this node (else at the end of the thread).
  constructor(after) {
    this.box = el("article", "message assistant");
    this.box.setAttribute("aria-label", "Answer");
    this.body = el("div", "answer-body");
    this.box.append(this.body);
    if (after) after.after(this.box); else $("messages").append(this.box);
    this.text = null;
    this.markdown = null;
    this.thinking = null;
    this.progress = null;
    this.agents = new Map();
    this.tools = new Map();
    this.runId = null;
    this.raw = "";
  }

  apply(kind, data) {
    switch (kind) {
      case "run.started": this.runId = data.run_id; break;
      case "turn.started": this.closeText(); this.thinking = null; break;
      case "output": this.appendText(data); break;
      case "thinking": this.appendThinking(data); break;
      case "progress": this.addProgress(data); break;
      case "tool.started": this.toolStarted(data); break;
      case "tool.finished": this.toolFinished(data); break;
      case "tool.approval_requested": this.approvalRequested(data); break;
      case "tool.approval_decided": this.approvalDecided(data); break;
      case "error": this.body.append(el("div", "error-text", "Error: " + data.message)); break;
      case "run.finished": this.finished(data); break;
      default: break;
    }
    followBottom();
  }

  closeText() {
    if (this.markdown) this.markdown.flush();
    this.text = null;
    this.markdown = null;
  }

  appendText(data) {
    this.thinking = null;
    if (!this.text) {
      this.text = el("div", "text");
      this.body.append(this.text);
      this.markdown = new MarkdownView(this.text);
    }
    if (data.replace) {
      this.raw = data.text;
      this.markdown.set(data.text);
    } else {
      this.raw += data.text;
      this.markdown.append(data.text);
    }
    this.box.dataset.raw = this.raw;
  }

  appendThinking(data) {
    if (!this.thinking) {
      this.closeText();
      const details = el("details", "thinking");
      const summary = el("summary", "", "Thinking");
      details.append(summary);
      this.thinking = el("div", "thinking-text");
      details.append(this.thinking);
      this.body.append(details);
      this.thinkingStarted = performance.now();
      this.thinkingSummary = summary;
    }
    this.thinking.textContent += data.text;
    this.thinkingSummary.textContent = `Thinking (${formatDuration(performance.now() - this.thinkingStarted)})`;
  }

  addProgress(data) {
    if (!this.progress) {
      this.progress = el("ul", "progress");
      this.progress.setAttribute("aria-label", "Sub-agents");
      this.body.append(this.progress);
    }
    const key = (data.call_path || []).join ? (data.call_path || [data.agent]).join("/") : String(data.call_path || data.agent);
    let row = this.agents.get(key);
    if (!row) {
      row = { item: el("li", "agent-progress running"), name: el("span", "agent-name", data.agent), status: el("span", "agent-status", "running"), note: el("span", "agent-note") };
      row.item.append(row.name, row.status, row.note);
      this.progress.append(row.item);
      this.agents.set(key, row);
    }
    const finished = data.kind === "agent_finished";
    row.item.className = "agent-progress " + (finished ? "done" : "running");
    row.status.textContent = finished ? "done" : "running";
    const what = data.message || data.now || "";
    const counts = data.done !== undefined && data.done !== null ? ` (${data.done} done${data.pending ? `, ${data.pending} pending` : ""})` : "";
    if (what || counts) row.note.textContent = what + counts;
    const files = finished && showAttachments(data.attachments);
    if (files) row.item.append(files);
  }

  toolStarted(data) {
    this.closeText();
    this.thinking = null;
    const details = el("details", "tool");
    details.dataset.call = data.call_id;
    const summary = el("summary");
    const name = el("span", "tool-name", data.tool);
    const status = el("span", "tool-status running", "running…");
    summary.append("Tool ", name, " ", status);
    details.append(summary);
    details.append(el("div", "label", "Arguments"));
    details.append(el("pre", "arguments", pretty(data.arguments)));
    const result = el("div", "result");
    details.append(result);
    this.body.append(details);
    this.tools.set(data.call_id, { status, result, started: performance.now() });
  }

  toolFinished(data) {
    const tool = this.tools.get(data.call_id);
    if (!tool) return;
    const ok = data.status === "ok";
    const took = typeof data.latency_ms === "number" ? data.latency_ms : performance.now() - tool.started;
    tool.status.className = "tool-status " + (ok ? "ok" : "failed");
    tool.status.textContent = `${ok ? "done" : "failed"} in ${formatDuration(took)}`;
    tool.result.append(el("div", "label", ok ? "Result" : "Error"));
    const shown = ok ? data.output : (data.error || data.output || "failed");
    tool.result.append(el("pre", "output", (shown === undefined ? "" : String(shown)) + (data.output_truncated ? "\n… (cut)" : "")));
    const files = showAttachments(data.attachments);
    if (files) tool.result.append(el("div", "label", "Files"), files);
  }

  approvalRequested(data) {
    this.closeText();
    const box = el("section", "approval");
    box.dataset.call = data.call_id;
    const heading = el("div", "approval-title", `The agent wants to run ${data.tool}. Approve it?`);
    heading.id = `approval-${data.call_id}`;
    box.setAttribute("aria-labelledby", heading.id);
    box.append(heading);
    const argsLabel = el("label", "label", "Arguments (edit before approving)");
    const args = el("textarea", "approval-args");
    args.id = `approval-args-${data.call_id}`;
    argsLabel.htmlFor = args.id;
    args.rows = 4;
    args.value = JSON.stringify(data.arguments, null, 2);
    const reasonLabel = el("label", "label", "Reason (optional)");
    const reason = el("input", "approval-reason");
    reason.id = `approval-reason-${data.call_id}`;
    reasonLabel.htmlFor = reason.id;
    box.append(argsLabel, args, reasonLabel, reason);
    const buttons = el("div", "buttons");
    const approve = button("approve", "Approve");
    const deny = button("deny", "Deny");
    buttons.append(approve, deny);
    box.append(buttons);
    const status = el("div", "approval-status");
    status.setAttribute("role", "status");
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
          args.focus();
          return;
        }
      }
      const runId = this.runId || (state.active && state.active.runId);
      try {
        await api(`/v1/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(data.call_id)}`, { method: "POST", json: body });
        status.textContent = decision === "approve" ? "Approved." : "Denied.";
        approve.disabled = deny.disabled = args.disabled = reason.disabled = true;
        $("prompt").focus();
      } catch (error) {
        status.textContent = describe(error);
      }
    };
    approve.addEventListener("click", () => decide("approve"));
    deny.addEventListener("click", () => decide("deny"));
    this.body.append(box);
    // Keyboard users land on the decision.
    approve.focus({ preventScroll: true });
  }

  approvalDecided(data) {
    for (const box of this.body.querySelectorAll(".approval")) {
      if (box.dataset.call !== data.call_id) continue;
      for (const control of box.querySelectorAll("button, textarea, input")) control.disabled = true;
      box.querySelector(".approval-status").textContent = `Decision: ${data.decision}` + (data.reason ? ` (${data.reason})` : "");
    }
  }

  finished(data) {
    this.closeText();
    const usage = data.usage || {};
    const footer = el("div", "footer");
    const parts = [
      `${usage.total_tokens || 0} tokens (${usage.input_tokens || 0} in, ${usage.output_tokens || 0} out)`,
      formatCost(data.cost_usd),
      formatDuration(data.duration_ms),
      data.status === "completed" ? "" : data.status,
    ].filter(Boolean);
    footer.append(el("span", "usage-line", parts.join(" · ")));
    if (this.runId) {
      const link = el("a", "run-link", "Run details");
      link.href = `#run=${encodeURIComponent(this.runId)}`;
      footer.append(link);
    }
    this.body.append(footer);
    if (data.status === "failed") {
      this.fail(`The answer failed (${data.exit_reason}): ${data.error || "no details"}.` + advice(data.exit_reason));
    } else if (data.status === "cancelled") {
      this.body.append(el("div", "error-text", "Stopped."));
    }
  }

  fail(message) {
    this.body.append(el("div", "error-text", message));
  }
}

// Keeps the newest text in view while the reader is at the bottom; never yanks them back up.
let pinned = true;
export function trackScroll() {
  const list = $("messages");
  list.addEventListener("scroll", () => {
    pinned = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
  });
}
export function followBottom(force) {
  const list = $("messages");
  if (force) pinned = true;
  if (!pinned) return;
  list.scrollTop = list.scrollHeight;
  // Markdown renders on the next frame: follow it there too.
  requestAnimationFrame(() => { if (pinned) list.scrollTop = list.scrollHeight; });
}
