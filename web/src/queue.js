// Messages sent while an answer is coming (SPEC §13): the message is sent at once with
// `busy: enqueue` and shown as queued (with Withdraw); the server stores and answers it after
// the answer in progress, and the page follows that answer when the current one ends. Files
// attached before sending go with the queued message and show with it.
import { api, describe, state, userPath } from "./api.js";
import { followQueuedRun } from "./chat.js";
import { button } from "./dom.js";
import { attachmentFields, clearQueued, hooks, showQueued } from "./hooks.js";
import { notify } from "./ui.js";

let waiting = null; // {runId, conversationId, text, files}

async function sendWhileBusy(text, files = []) {
  if (waiting) {
    notify("A message is already queued: withdraw it or wait for its answer.", "info");
    return false;
  }
  const conversationId = state.active && state.active.conversationId;
  if (!conversationId) return false;
  let response;
  try {
    response = await api(userPath("/chat"), {
      method: "POST",
      json: Object.assign(
        { message: text, conversation_id: conversationId, stream: true, on_disconnect: "continue", busy: "enqueue" },
        attachmentFields(files),
      ),
    });
  } catch (error) {
    notify(describe(error));
    return false;
  }
  const runId = response.headers.get("x-agentd-run-id");
  // The run goes on without this stream (on_disconnect: continue); it is followed in its turn.
  response.body.cancel().catch(() => {});
  waiting = { runId, conversationId, text, files };
  showQueued(text, files);
  const withdraw = button("withdraw", "Withdraw", "Withdraw the queued message");
  withdraw.addEventListener("click", () => withdrawQueued());
  document.getElementById("queued").append(withdraw);
  return true;
}

async function withdrawQueued() {
  if (!waiting) return;
  const { runId, conversationId } = waiting;
  try {
    await api(userPath(`/conversations/${encodeURIComponent(conversationId)}/queue/${encodeURIComponent(runId)}`), { method: "DELETE" });
  } catch (error) {
    notify(describe(error));
    return;
  }
  waiting = null;
  clearQueued();
}

// The answer in progress ended: the queued message's answer comes next.
async function answerFinished() {
  if (!waiting) return;
  const next = waiting;
  waiting = null;
  clearQueued();
  if (next.conversationId === state.conversationId) await followQueuedRun(next.runId, next.conversationId, next.text, next.files);
}

hooks.register("queue", { sendWhileBusy, answerFinished });
