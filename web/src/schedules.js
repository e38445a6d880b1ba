// The Schedules tab (SPEC §13): the caller's schedules (an admin's: everyone's) from
// GET /v1/schedules, each with its agent, prompt, cron and time zone, next due time, overlap and
// whether it is on; a schedule opens beside the list with its due times from
// GET /v1/schedules/{id}/runs (fired, queued, skipped, failed) and their runs, each opening in
// the Runs tab. **Run now** and **Pause** / **Resume** act on the open schedule.
import { api, apiJson, describe } from "./api.js";
import { button, el, formatTime } from "./dom.js";
import { hooks } from "./hooks.js";

let view = null;
let opened = null; // the schedule shown in the detail

function mount(section) {
  view = section;
  const status = el("p", "schedules-status");
  status.id = "schedules-status";
  status.setAttribute("role", "status");
  const table = el("table", "usage-table schedule-table");
  table.id = "schedule-table";
  const detail = el("section", "schedule-detail");
  detail.id = "schedule-detail";
  detail.hidden = true;
  detail.setAttribute("aria-labelledby", "schedule-detail-title");
  section.replaceChildren(el("h1", "usage-title", "Schedules"), status, scrolling(table), detail);
}

// A table that scrolls sideways on its own on a narrow screen (the page never does).
function scrolling(table) {
  const wrap = el("div", "table-wrap");
  wrap.append(table);
  return wrap;
}

function headRow(titles) {
  const row = el("tr");
  for (const title of titles) {
    const cell = el("th", null, title);
    cell.scope = "col";
    row.append(cell);
  }
  const head = el("thead");
  head.append(row);
  return head;
}

async function load() {
  if (!view) return;
  const status = view.querySelector("#schedules-status");
  status.textContent = "Loading…";
  let list;
  try {
    list = await apiJson("/v1/schedules");
  } catch (error) {
    status.textContent = describe(error);
    return;
  }
  const schedules = list.data || [];
  status.textContent = schedules.length
    ? `${schedules.length} schedule${schedules.length === 1 ? "" : "s"}.`
    : "No schedules yet: POST /v1/schedules makes one (see the README).";
  const body = el("tbody");
  for (const schedule of schedules) body.append(scheduleRow(schedule));
  view.querySelector("#schedule-table").replaceChildren(
    headRow(["Agent", "Prompt", "When", "Next", "Overlap", "State", "Actions"]), body);
  if (opened) {
    const again = schedules.find((s) => s.id === opened.id);
    if (again) open(again); else close();
  }
}

function scheduleRow(schedule) {
  const row = el("tr");
  row.dataset.id = schedule.id;
  row.append(
    el("td", null, schedule.agent),
    el("td", "schedule-prompt", schedule.prompt),
    el("td", null, `${schedule.cron} (${schedule.timezone})`),
    el("td", null, schedule.next_due_at ? formatTime(schedule.next_due_at) : "—"),
    el("td", null, schedule.overlap),
    el("td", schedule.enabled ? "state-on" : "state-off", schedule.enabled ? "on" : "paused"),
  );
  const cell = el("td");
  const show = button("open-schedule", "Runs", `Show the runs of the ${schedule.agent} schedule`);
  show.addEventListener("click", () => open(schedule));
  cell.append(show);
  row.append(cell);
  return row;
}

function close() {
  opened = null;
  if (view) view.querySelector("#schedule-detail").hidden = true;
}

async function open(schedule) {
  opened = schedule;
  const detail = view.querySelector("#schedule-detail");
  const title = el("h2", null, `${schedule.agent}: ${schedule.cron} (${schedule.timezone})`);
  title.id = "schedule-detail-title";
  const runNow = button("primary", "Run now");
  runNow.id = "schedule-run-now";
  runNow.addEventListener("click", () => act(runNow, `/v1/schedules/${encodeURIComponent(schedule.id)}/run`, { method: "POST" }));
  const toggle = button(null, schedule.enabled ? "Pause" : "Resume");
  toggle.id = "schedule-toggle";
  toggle.addEventListener("click", () => act(toggle, `/v1/schedules/${encodeURIComponent(schedule.id)}`,
    { method: "PATCH", json: { enabled: !schedule.enabled } }));
  const hide = button(null, "Close");
  hide.addEventListener("click", close);
  const actions = el("div", "schedule-actions");
  actions.append(runNow, toggle, hide);
  const note = el("p", "schedules-status");
  note.id = "schedule-note";
  const runs = el("table", "usage-table schedule-runs");
  runs.id = "schedule-runs";
  detail.replaceChildren(title, el("p", "schedule-prompt", schedule.prompt), actions, note, scrolling(runs));
  detail.hidden = false;
  let fires;
  try {
    fires = await apiJson(`/v1/schedules/${encodeURIComponent(schedule.id)}/runs`);
  } catch (error) {
    note.textContent = describe(error);
    return;
  }
  const body = el("tbody");
  for (const fire of fires.data || []) body.append(fireRow(fire));
  note.textContent = body.children.length ? "" : "It has not fired yet.";
  runs.replaceChildren(headRow(["Due", "Status", "Run"]), body);
}

function fireRow(fire) {
  const row = el("tr");
  row.append(el("td", null, formatTime(fire.due_at)), el("td", `fire-${fire.status}`, fire.status));
  const cell = el("td");
  if (fire.run_id) {
    const link = el("a", "open-run", "Open run");
    link.href = `#run=${encodeURIComponent(fire.run_id)}`;
    cell.append(link);
  }
  row.append(cell);
  return row;
}

// Runs an action on the open schedule, then shows the list and the schedule as they are now.
async function act(control, path, options) {
  control.disabled = true;
  const note = view.querySelector("#schedule-note");
  try {
    await api(path, options);
    note.textContent = "";
  } catch (error) {
    note.textContent = describe(error);
    control.disabled = false;
    return;
  }
  await load();
}

hooks.register("schedules", { mount, show: load });
