// The Usage tab (SPEC §14): what was spent, grouped by day, agent, model, key or user over a
// range, from GET /v1/usage (a user sees their own runs, an admin everyone's), as a bar chart of
// the chosen measure and a table of every measure.
import { apiJson, describe, state } from "./api.js";
import { el } from "./dom.js";
import { hooks } from "./hooks.js";

const GROUPS = [["day", "Day"], ["agent", "Agent"], ["model", "Model"], ["key", "Key"], ["user", "User"]];
const RANGES = [[7, "Last 7 days"], [30, "Last 30 days"], [90, "Last 90 days"]];
const MEASURES = [
  ["total_tokens", "Tokens"],
  ["cost_usd", "Cost (USD)"],
  ["runs", "Runs"],
  ["tool_calls", "Tool calls"],
];
const COLUMNS = [
  ["runs", "Runs"], ["input_tokens", "In"], ["output_tokens", "Out"], ["cached_tokens", "Cached"],
  ["reasoning_tokens", "Reasoning"], ["total_tokens", "Tokens"], ["cost_usd", "Cost"], ["tool_calls", "Tool calls"],
];
const SVG = "http://www.w3.org/2000/svg";

let view = null;
let controls = null;

function select(id, label, options, value) {
  const box = el("label", "usage-control");
  box.append(el("span", null, label));
  const input = el("select");
  input.id = id;
  for (const [v, text] of options) input.append(new Option(text, String(v)));
  input.value = String(value);
  input.addEventListener("change", load);
  box.append(input);
  return [box, input];
}

function mount(section) {
  view = section;
  const [groupBox, group] = select("usage-group", "Group by", GROUPS, "day");
  const [rangeBox, range] = select("usage-range", "Range", RANGES, 30);
  const [measureBox, measure] = select("usage-measure", "Chart", MEASURES, "total_tokens");
  controls = { group, range, measure };
  const head = el("div", "usage-controls");
  head.append(groupBox, rangeBox, measureBox);
  const chart = el("div", "usage-chart");
  chart.id = "usage-chart";
  const table = el("table", "usage-table");
  table.id = "usage-table";
  const status = el("p", "usage-status");
  status.id = "usage-status";
  section.replaceChildren(el("h1", "usage-title", "Usage"), head, status, chart, table);
}

function fromDate(days) {
  const from = new Date(Date.now() - days * 86400000);
  return from.toISOString().slice(0, 10);
}

function format(key, value) {
  if (key === "cost_usd") return "$" + (value || 0).toFixed(4);
  return (value || 0).toLocaleString();
}

async function load() {
  if (!view || !controls) return;
  const status = view.querySelector("#usage-status");
  const groupBy = controls.group.value;
  const query = new URLSearchParams({ group_by: groupBy, from: fromDate(Number(controls.range.value)) });
  status.textContent = "Loading…";
  let usage;
  try {
    usage = await apiJson("/v1/usage?" + query);
  } catch (error) {
    status.textContent = describe(error);
    return;
  }
  const rows = usage.data || [];
  const scope = state.me && state.me.admin ? "everyone's runs" : "your runs";
  status.textContent = rows.length ? `Usage of ${scope}, by ${groupBy}.` : `No runs in this range (${scope}).`;
  drawChart(view.querySelector("#usage-chart"), rows, controls.measure.value);
  drawTable(view.querySelector("#usage-table"), rows, groupBy);
}

// Horizontal bars, one per group, scaled to the largest value; each names its value.
function drawChart(box, rows, measure) {
  const label = (MEASURES.find(([key]) => key === measure) || [measure, measure])[1];
  const max = Math.max(1e-9, ...rows.map((row) => row[measure] || 0));
  const rowHeight = 26;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 600 ${Math.max(rowHeight, rows.length * rowHeight)}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `${label} by group`);
  rows.forEach((row, index) => {
    const y = index * rowHeight;
    const name = document.createElementNS(SVG, "text");
    name.setAttribute("x", "0");
    name.setAttribute("y", String(y + 17));
    name.setAttribute("class", "usage-bar-label");
    name.textContent = String(row.group).slice(0, 22);
    const bar = document.createElementNS(SVG, "rect");
    const width = Math.max(1, Math.round(((row[measure] || 0) / max) * 330));
    bar.setAttribute("x", "170");
    bar.setAttribute("y", String(y + 4));
    bar.setAttribute("width", String(width));
    bar.setAttribute("height", "18");
    bar.setAttribute("class", "usage-bar");
    const value = document.createElementNS(SVG, "text");
    value.setAttribute("x", String(176 + width));
    value.setAttribute("y", String(y + 17));
    value.setAttribute("class", "usage-bar-value");
    value.textContent = format(measure, row[measure]);
    svg.append(name, bar, value);
  });
  box.replaceChildren(svg);
}

function drawTable(table, rows, groupBy) {
  const head = el("tr");
  head.append(el("th", null, groupBy));
  for (const [, title] of COLUMNS) head.append(el("th", null, title));
  const body = el("tbody");
  for (const row of rows) {
    const line = el("tr");
    line.append(el("td", null, String(row.group)));
    for (const [key] of COLUMNS) line.append(el("td", "number", format(key, row[key])));
    body.append(line);
  }
  const thead = el("thead");
  thead.append(head);
  table.replaceChildren(thead, body);
}

hooks.register("usage", { mount, show: load });
