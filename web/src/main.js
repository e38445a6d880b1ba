// agentd's web page (SPEC §10): the chat and the runs console. It speaks only agentd's public
// API. Bundled by web/build.mjs into src/http/web/assets/app.js, which the binary embeds.
import { apiJson, describe, setAuthorizer, state, userId } from "./api.js";
import { trackScroll } from "./answer.js";
import { resumeActiveRun, saveActiveNow, send, stop, wireThreadActions } from "./chat.js";
import { flushDeletes, loadConversations, newChat, openConversation, searchSoon, setThreadHead } from "./conversations.js";
import { $ } from "./dom.js";
import { hooks, mountHooks } from "./hooks.js";
import { wireCopyButtons } from "./markdown.js";
import { closeRun, loadRuns, newerRuns, olderRuns, openRun, setRunFilter } from "./runs.js";
import { notify, showTab, wireSidebar } from "./ui.js";
// Features that plug into the hooks import themselves here.
import "./signin.js";
import "./schedules.js";
import "./usage.js";
import "./queue.js";
import "./attachments.js";

const DEFAULT_USER = "local";

async function connect() {
  notify("");
  state.key = $("key").value.trim();
  localStorage.setItem("agentd.key", state.key);
  state.user = $("user").value.trim();
  localStorage.setItem("agentd.user", state.user);
  const signin = hooks.get("signin");
  if (signin && signin.ready) await signin.ready();
  if (signin && signin.authorize) setAuthorizer(() => Object.assign({}, signin.authorize() || {}));
  try {
    state.me = await apiJson("/v1/me");
  } catch (error) {
    state.me = null;
    notify(describe(error));
    $("identity").open = true;
    return;
  }
  $("user-field").hidden = !!state.me.user_id;
  if (!userId()) {
    // A key bound to no user (or no key on a loopback server): chat as `local` until a name
    // is entered, so the first visit works at once.
    state.user = (signin && signin.user && signin.user()) || DEFAULT_USER;
    $("user").value = state.user;
  }
  $("identity-summary").textContent = userId();
  $("identity").open = false;
  await loadAgents();
  await loadConversations();
  if (!(await resumeActiveRun())) {
    const current = sessionStorage.getItem("agentd.conversation");
    if (current && !state.conversationId) await openConversation(current);
    else if (!state.conversationId) setThreadHead(null);
  }
  route();
}

async function loadAgents() {
  try {
    const list = await apiJson("/v1/agents");
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

// #runs, #runs?conversation=ID, #run=ID, #conversation=ID, #schedules, #usage; anything else is
// the chat.
function route() {
  const hash = decodeURIComponent(location.hash.slice(1));
  if (hash.startsWith("run=")) {
    showTab("runs");
    if (!$("run-table").tBodies[0].children.length) loadRuns();
    openRun(hash.slice(4));
  } else if (hash.startsWith("runs")) {
    showTab("runs");
    closeRun();
    const conversation = hash.startsWith("runs?conversation=") ? hash.slice("runs?conversation=".length) : "";
    if (conversation) setRunFilter(conversation, userId());
    loadRuns();
  } else if (hash.startsWith("conversation=")) {
    showTab("chat");
    openConversation(hash.slice("conversation=".length));
  } else if (hash === "schedules" && hooks.get("schedules")) {
    showTab("schedules");
    hooks.get("schedules").show();
  } else if (hash === "usage" && hooks.get("usage")) {
    showTab("usage");
    hooks.get("usage").show();
  } else {
    showTab("chat");
  }
}

function wire() {
  $("key").value = state.key;
  $("user").value = state.user;
  $("identity-form").addEventListener("submit", (e) => { e.preventDefault(); connect(); });
  $("new-chat").addEventListener("click", newChat);
  $("agent").addEventListener("change", () => { if (!state.conversationId) setThreadHead(null); });
  $("search").addEventListener("input", searchSoon);
  $("more-conversations").addEventListener("click", () => loadConversations(true));
  $("composer").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
    if (e.key === "Escape" && state.active) { e.preventDefault(); stop(); }
  });
  $("stop").addEventListener("click", stop);
  $("run-filters").addEventListener("submit", (e) => loadRuns(e));
  $("runs-next").addEventListener("click", olderRuns);
  $("runs-prev").addEventListener("click", newerRuns);
  $("run-detail-close").addEventListener("click", closeRun);
  $("run-detail").addEventListener("keydown", (e) => { if (e.key === "Escape") closeRun(); });
  window.addEventListener("hashchange", route);
  window.addEventListener("pagehide", () => { saveActiveNow(); flushDeletes(); });
  wireCopyButtons(document.body);
  wireThreadActions();
  wireSidebar();
  trackScroll();
  mountHooks();
}

document.addEventListener("DOMContentLoaded", () => {
  wire();
  connect();
});
