// barrierflow's dashboard: polls the JobMaster's REST endpoint once a second and draws what
// it answers. Plain JavaScript, no build step, no library: everything is served from the
// package. A route that answers 404 (an older endpoint) leaves its section "not available".
"use strict";

const POLL_MS = 1000;
const SLOW_POLL_EVERY = 5; // exceptions, configuration and logs: every 5th poll
const HISTORY_ROWS = 50; // checkpoints shown in the history table (the chart shows all)
const TOKEN_KEY = "barrierflow.token";
const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

const state = {
  jobId: null,
  job: null,
  metrics: null,
  checkpoints: null,
  selectedVertex: null,
  vertexDetail: null, // /jobs/<id>/vertices/<vid> of the selected vertex (host, pid, status)
  operatorMetrics: null, // its operators' and user functions' metrics: [{id, value}]
  shownCheckpoint: null,
  ticks: 0,
  busy: false,
  graphKey: null,
  graphNodes: new Map(),
  operations: [], // savepoints asked for from this page: {kind, requestId, status, location, failure}
};

// ---- small helpers ---------------------------------------------------------------------------

function $(id) {
  return document.getElementById(id);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) if (child) node.append(child);
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function missing(value) {
  return value === null || value === undefined || Number.isNaN(value);
}

function fmtNumber(value, digits = 1) {
  if (missing(value)) return "–";
  const abs = Math.abs(value);
  if (abs >= 1e9) return (value / 1e9).toFixed(digits) + " G";
  if (abs >= 1e6) return (value / 1e6).toFixed(digits) + " M";
  if (abs >= 1e4) return (value / 1e3).toFixed(digits) + " k";
  if (Number.isInteger(value) || abs >= 100) return String(Math.round(value));
  return value.toFixed(digits);
}

function fmtBytes(value) {
  if (missing(value)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = value;
  let unit = 0;
  while (Math.abs(v) >= 1024 && unit < units.length - 1) {
    v /= 1024;
    unit += 1;
  }
  return (unit === 0 ? String(Math.round(v)) : v.toFixed(1)) + " " + units[unit];
}

function fmtMs(value) {
  if (missing(value)) return "–";
  if (Math.abs(value) < 1000) return Math.round(value) + " ms";
  if (Math.abs(value) < 60000) return (value / 1000).toFixed(1) + " s";
  return fmtDuration(value);
}

function fmtDuration(ms) {
  if (missing(ms) || ms < 0) return "–";
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts = [];
  if (d) parts.push(d + "d");
  if (d || h) parts.push(h + "h");
  if (d || h || m) parts.push(m + "m");
  parts.push(s + "s");
  return parts.join(" ");
}

function fmtTime(epochMs) {
  if (missing(epochMs) || epochMs <= 0) return "–";
  return new Date(epochMs).toLocaleTimeString([], { hour12: false });
}

function fmtWatermark(value) {
  if (missing(value)) return "–";
  if (value <= -9e15) return "none yet";
  if (value >= 9e15) return "end";
  return new Date(value).toISOString().replace("T", " ").replace("Z", "");
}

function fmtShare(msPerSecond) {
  if (missing(msPerSecond)) return "–";
  return Math.round(msPerSecond / 10) + " %";
}

function fmtRate(value) {
  return missing(value) ? "–" : fmtNumber(value) + "/s";
}

function fmtByteRate(value) {
  return missing(value) ? "–" : fmtBytes(value) + "/s";
}

// ---- talking to the endpoint ------------------------------------------------------------------

async function getJson(path) {
  // The token goes with every read: the logs and the exception history need it.
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  const response = await fetch(path, { headers, cache: "no-store" });
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    body = null;
  }
  return { ok: response.ok, status: response.status, body };
}

function errorText(answer) {
  const errors = answer.body && answer.body.errors;
  return "HTTP " + answer.status + (errors && errors.length ? ": " + errors.join("; ") : "");
}

// Why a panel is empty: not served here, the job's token missing or wrong, or the error.
function unavailableText(answer) {
  if (answer.status === 404) return "Not available on this endpoint.";
  if (answer.status === 401 || answer.status === 403) return "Needs the job's token: open the dashboard link `barrierflow run` printed, or set the token below.";
  return errorText(answer);
}

function jobPath(suffix) {
  return "/jobs/" + encodeURIComponent(state.jobId) + (suffix || "");
}

async function findJob() {
  const answer = await getJson("/jobs");
  if (!answer.ok || !answer.body || !answer.body.jobs || !answer.body.jobs.length) {
    throw new Error("no job on this endpoint (" + errorText(answer) + ")");
  }
  return answer.body.jobs[0].id;
}

async function poll() {
  if (state.busy) return;
  state.busy = true;
  try {
    await pollOnce();
  } finally {
    state.busy = false;
  }
}

async function pollOnce() {
  let job, checkpoints, metrics;
  try {
    if (!state.jobId) state.jobId = await findJob();
    [job, checkpoints, metrics] = await Promise.all([
      getJson(jobPath("")),
      getJson(jobPath("/checkpoints")),
      getJson(jobPath("/metrics/history")),
    ]);
    if (state.selectedVertex !== null) {
      const vertex = jobPath("/vertices/" + encodeURIComponent(state.selectedVertex));
      const [detail, ids] = await Promise.all([getJson(vertex), getJson(vertex + "/metrics")]);
      state.vertexDetail = detail.ok ? detail.body : null;
      state.operatorMetrics = null;
      const wanted = ids.ok && Array.isArray(ids.body) ? ids.body.map((m) => m.id).filter(isOperatorMetric) : [];
      if (wanted.length) {
        const values = await getJson(vertex + "/metrics?get=" + wanted.map(encodeURIComponent).join(","));
        state.operatorMetrics = values.ok ? values.body : null;
      }
    }
  } catch (error) {
    showConnection("Cannot reach the job's endpoint (" + error.message + "); the job may have ended.", "error");
    return;
  }
  if (job.ok) state.job = job.body;
  state.checkpoints = checkpoints.ok ? checkpoints.body : null;
  state.metrics = metrics.ok ? metrics.body : null;
  const slow = state.ticks % SLOW_POLL_EVERY === 0;
  state.ticks += 1;
  try {
    renderOverview();
    renderGraph();
    renderVertices();
    renderCharts();
    renderCheckpoints();
    renderSavepoints();
    if (slow) await pollSlow();
  } catch (error) {
    console.error(error); // a bug of this page, not of the job: say so, and keep polling
    showConnection("The dashboard failed to draw: " + error.message, "error");
    return;
  }
  showConnection("Updated " + fmtTime(Date.now()) + ".", "ok");
}

function showConnection(text, kind) {
  $("connection").textContent = text;
  $("connection").className = kind;
}

async function pollSlow() {
  const get = (path) => getJson(path).catch((error) => ({ ok: false, status: 0, body: { errors: [error.message] } }));
  const [exceptions, config, checkpointConfig, logs] = await Promise.all([
    get(jobPath("/exceptions")),
    get(jobPath("/config")),
    get(jobPath("/checkpoints/config")),
    get(jobPath("/logs")),
  ]);
  renderExceptions(exceptions);
  renderKeyValues($("job-config"), config.ok ? config.body : null);
  renderKeyValues($("checkpoint-config"), checkpointConfig.ok ? checkpointConfig.body : null);
  renderLogs(logs);
}

// ---- overview --------------------------------------------------------------------------------

function renderOverview() {
  const job = state.job;
  if (!job) return;
  $("job-name").textContent = job.name || "";
  document.title = (job.name || "job") + " · barrierflow";
  const stateNode = $("job-state");
  stateNode.textContent = job.state;
  stateNode.className = "state state-" + String(job.state || "").toLowerCase();
  $("job-attempt").textContent = missing(job.attempt) ? "–" : String(job.attempt);
  const restarts = state.metrics ? state.metrics.restarts : job.restarts;
  $("job-restarts").textContent = missing(restarts) ? "–" : String(restarts);
  $("job-uptime").textContent = fmtDuration(job.duration);
  $("job-id").textContent = job.jid || state.jobId;
  const sparkUi = job["spark-ui"] || job.spark_ui || job.spark_ui_url || job["spark-ui-url"];
  $("spark-ui").hidden = !sparkUi;
  if (sparkUi) $("spark-ui-link").href = sparkUi;
}

// ---- the job graph ---------------------------------------------------------------------------

/** Vertices and edges from the job's body: Flink's `plan.nodes[].inputs`, or `vertices` and
 * `edges` (source/target/partitioning), or vertices alone. */
function graphOf(job) {
  const vertices = (job.vertices || []).map((v) => ({
    id: String(v.id),
    name: v.name,
    parallelism: v.parallelism,
  }));
  const edges = [];
  const plan = job.plan && Array.isArray(job.plan.nodes) ? job.plan.nodes : null;
  if (plan) {
    for (const node of plan) {
      if (!vertices.some((v) => v.id === String(node.id))) {
        vertices.push({ id: String(node.id), name: node.description || node.operator, parallelism: node.parallelism });
      }
      for (const input of node.inputs || []) {
        edges.push({ from: String(input.id), to: String(node.id), label: input.ship_strategy || input.partitioning || "" });
      }
    }
  } else if (Array.isArray(job.edges)) {
    for (const edge of job.edges) {
      edges.push({
        from: String(edge.source),
        to: String(edge.target),
        label: edge.partitioning || edge.ship_strategy || "",
      });
    }
  }
  return { vertices, edges };
}

function layout(vertices, edges) {
  const level = new Map(vertices.map((v) => [v.id, 0]));
  for (let round = 0; round < vertices.length; round += 1) {
    for (const edge of edges) {
      if (level.has(edge.from) && level.has(edge.to)) {
        level.set(edge.to, Math.max(level.get(edge.to), level.get(edge.from) + 1));
      }
    }
  }
  const columns = new Map();
  for (const v of vertices) {
    const column = level.get(v.id);
    if (!columns.has(column)) columns.set(column, []);
    columns.get(column).push(v);
  }
  const W = 210, H = 74, GX = 90, GY = 28, PAD = 12;
  const positions = new Map();
  let rows = 1;
  for (const [column, members] of columns) {
    rows = Math.max(rows, members.length);
    members.forEach((v, row) => positions.set(v.id, { x: PAD + column * (W + GX), y: PAD + row * (H + GY) }));
  }
  const width = PAD * 2 + columns.size * W + (columns.size - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  return { positions, width, height, W, H };
}

function renderGraph() {
  if (!state.job) return;
  const { vertices, edges } = graphOf(state.job);
  const key = JSON.stringify([vertices, edges]);
  const root = $("graph");
  if (key !== state.graphKey) {
    state.graphKey = key;
    state.graphNodes = new Map();
    clear(root);
    const { positions, width, height, W, H } = layout(vertices, edges);
    root.setAttribute("viewBox", `0 0 ${Math.max(width, 240)} ${Math.max(height, 80)}`);
    root.setAttribute("width", String(Math.max(width, 240)));
    root.setAttribute("height", String(Math.max(height, 80)));
    root.append(
      svg("defs", {},
        svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
          svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))),
    );
    for (const edge of edges) {
      const a = positions.get(edge.from);
      const b = positions.get(edge.to);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
      const mx = (x1 + x2) / 2;
      root.append(
        svg("g", { class: "edge", "data-testid": `edge-${edge.from}-${edge.to}` },
          svg("path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" }),
          svg("text", { x: mx, y: (y1 + y2) / 2 - 6, "text-anchor": "middle", class: "edge-label", text: edge.label })),
      );
    }
    for (const v of vertices) {
      const p = positions.get(v.id);
      const name = v.name.length > 30 ? v.name.slice(0, 29) + "…" : v.name;
      const box = svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6, class: "vertex-box" });
      const figures = svg("text", { x: p.x + 10, y: p.y + 56, class: "vertex-figures", text: "" });
      const group = svg("g", {
        class: "vertex",
        "data-testid": `vertex-${v.id}`,
        "data-vertex-id": v.id,
        tabindex: 0,
        role: "button",
        "aria-label": `${v.name}, parallelism ${v.parallelism}: show its subtasks`,
      },
      svg("title", { text: v.name }),
      box,
      svg("text", { x: p.x + 10, y: p.y + 20, class: "vertex-name", text: name }),
      svg("text", { x: p.x + 10, y: p.y + 38, class: "vertex-parallelism", text: `parallelism ${v.parallelism}` }),
      figures);
      group.addEventListener("click", () => selectVertex(v.id));
      group.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          selectVertex(v.id);
        }
      });
      root.append(group);
      state.graphNodes.set(v.id, { group, box, figures });
    }
  }
  for (const [id, node] of state.graphNodes) {
    const m = vertexMetrics(id);
    const busy = m ? m.busy_ms_per_second : null;
    const bp = m ? m.backpressured_ms_per_second : null;
    node.box.setAttribute("fill", busyColour(busy));
    const pressured = !missing(bp) && bp >= 100;
    node.box.setAttribute("class", "vertex-box" + (pressured ? " backpressured" : "") + (state.selectedVertex === id ? " selected" : ""));
    const parts = [];
    if (m) parts.push(`in ${fmtRate(m.records_in_per_second)}`, `out ${fmtRate(m.records_out_per_second)}`);
    if (pressured) parts.push(`BP ${fmtShare(bp)}`);
    else if (!missing(busy)) parts.push(`busy ${fmtShare(busy)}`);
    node.figures.textContent = parts.join(" · ");
  }
}

function busyColour(busyMsPerSecond) {
  if (missing(busyMsPerSecond)) return "#eef1f5";
  const share = Math.max(0, Math.min(1, busyMsPerSecond / 1000));
  return `hsl(${Math.round(120 * (1 - share))}, 62%, 84%)`;
}

function metricsVertex(id) {
  if (!state.metrics || !state.metrics.vertices) return null;
  return state.metrics.vertices.find((v) => String(v.id) === String(id)) || null;
}

function vertexMetrics(id) {
  const v = metricsVertex(id);
  return v ? v.metrics : null;
}

function selectVertex(id) {
  state.selectedVertex = id;
  state.vertexDetail = null;
  state.operatorMetrics = null;
  renderGraph();
  renderVertices();
  $("subtasks-section").scrollIntoView({ block: "nearest" });
}

// ---- vertex and subtask tables ---------------------------------------------------------------

function figureCells(m) {
  return [
    fmtNumber(m.records_in), fmtNumber(m.records_out),
    fmtRate(m.records_in_per_second), fmtRate(m.records_out_per_second),
    fmtByteRate(m.bytes_in_per_second), fmtByteRate(m.bytes_out_per_second),
    fmtShare(m.busy_ms_per_second), fmtShare(m.idle_ms_per_second), fmtShare(m.backpressured_ms_per_second),
    fmtWatermark(m.watermark), fmtMs(m.watermark_lag_ms),
  ].map((text) => el("td", { class: "num", text }));
}

function renderVertices() {
  if (!state.job) return;
  const body = clear($("vertices").tBodies[0]);
  for (const v of graphOf(state.job).vertices) {
    const m = vertexMetrics(v.id) || {};
    const select = el("button", { type: "button", class: "link", "data-testid": `select-vertex-${v.id}`, text: v.name, onclick: () => selectVertex(v.id) });
    body.append(el("tr", { "data-testid": `vertex-row-${v.id}`, class: state.selectedVertex === v.id ? "selected" : null },
      el("th", { scope: "row" }, select), el("td", { class: "num", text: v.parallelism }), figureCells(m)));
  }
  const section = $("subtasks-section");
  if (state.selectedVertex === null) {
    section.hidden = true;
    return;
  }
  section.hidden = false;
  const vertex = graphOf(state.job).vertices.find((v) => v.id === state.selectedVertex);
  $("subtasks-vertex").textContent = vertex ? vertex.name : state.selectedVertex;
  renderOperatorMetrics();
  const rows = clear($("subtasks").tBodies[0]);
  const reported = new Map(((metricsVertex(state.selectedVertex) || {}).subtasks || []).map((s) => [s.subtask, s]));
  const detail = state.vertexDetail && String(state.vertexDetail.id) === state.selectedVertex ? state.vertexDetail : null;
  const placed = new Map(((detail && detail.subtasks) || []).map((s) => [s.subtask, s]));
  const indices = [...new Set([...reported.keys(), ...placed.keys()])].sort((a, b) => a - b);
  if (!indices.length) rows.append(el("tr", {}, el("td", { colspan: 16, class: "muted", text: "No subtask reported yet." })));
  for (const index of indices) {
    const m = reported.get(index) || (placed.get(index) || {}).metrics || {};
    const where = placed.get(index) || {};
    rows.append(el("tr", { "data-testid": `subtask-row-${index}` },
      el("th", { scope: "row", text: index }),
      el("td", { text: where.status || "–" }), el("td", { text: where.host || "–" }), el("td", { class: "num", text: where.pid ?? "–" }),
      el("td", { class: "num", text: m.attempt ?? where.attempt ?? "–" }), figureCells(m)));
  }
}

/** `<subtask>.<operator>.<metric>`: an operator's or a user function's metric (the subtask's
 * own, `<subtask>.<metric>`, are in the subtask table). */
function isOperatorMetric(id) {
  return /^\d+\..+\..+$/.test(id);
}

function metricText(name, value, numeric) {
  if (value === null || value === undefined) return "–";
  if (!numeric) return String(value);
  if (/watermark$/i.test(name)) return fmtWatermark(Number(value));
  if (name === "watermarkLag") return fmtMs(Number(value));
  return fmtNumber(Number(value), 2);
}

/** One row per subtask and operator, one column per metric name (user metrics included). */
function renderOperatorMetrics() {
  const table = clear($("operator-metrics"));
  const rows = new Map();
  const names = [];
  for (const metric of state.operatorMetrics || []) {
    const parts = metric.id.split(".");
    const subtask = parts[0];
    const name = parts[parts.length - 1];
    const operator = parts.slice(1, -1).join(".");
    const key = subtask + "\u0000" + operator;
    if (!rows.has(key)) rows.set(key, { subtask, operator, values: new Map() });
    if (!names.includes(name)) names.push(name);
    rows.get(key).values.set(name, metric.value);
  }
  table.append(el("thead", {}, el("tr", {},
    el("th", { scope: "col", text: "Subtask" }), el("th", { scope: "col", text: "Operator" }),
    names.map((name) => el("th", { scope: "col", text: name })))));
  const body = el("tbody");
  if (!rows.size) body.append(el("tr", {}, el("td", { colspan: 2, class: "muted", text: "None reported yet." })));
  for (const row of rows.values()) {
    body.append(el("tr", { "data-testid": "operator-metric" },
      el("td", { class: "num", text: row.subtask }), el("th", { scope: "row", text: row.operator }),
      names.map((name) => {
        const value = row.values.has(name) ? row.values.get(name) : null;
        const numeric = value !== null && value !== "" && !Number.isNaN(Number(value));
        return el("td", { class: "num", text: metricText(name, value, numeric) });
      })));
  }
  table.append(body);
}

// ---- charts ----------------------------------------------------------------------------------

/** A line chart of `series` ({name, xs, ys}, a null y breaks the line) drawn by hand in SVG. */
function drawChart(root, series, { yFormat = fmtNumber, points = false } = {}) {
  clear(root);
  const W = 460, H = 200, L = 58, R = 10, T = 10, B = 48;
  root.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const xs = series.flatMap((s) => s.xs);
  const ys = series.flatMap((s) => s.ys).filter((y) => !missing(y));
  if (!xs.length || !ys.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "muted", text: "no data yet" }));
    return;
  }
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  const y1 = niceCeiling(Math.max(...ys, 1) * 1.05);
  const px = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const py = (y) => T + (1 - y / y1) * (H - T - B);
  for (const fraction of [0, 0.5, 1]) {
    const y = y1 * fraction;
    root.append(svg("line", { x1: L, x2: W - R, y1: py(y), y2: py(y), class: "grid" }));
    root.append(svg("text", { x: L - 4, y: py(y) + 4, "text-anchor": "end", class: "axis", text: yFormat(y) }));
  }
  root.append(svg("text", { x: L, y: H - B + 14, class: "axis", text: fmtTime(x0) }));
  root.append(svg("text", { x: W - R, y: H - B + 14, "text-anchor": "end", class: "axis", text: fmtTime(x1) }));
  series.forEach((s, index) => {
    const colour = PALETTE[index % PALETTE.length];
    let run = [];
    const flush = () => {
      if (run.length > 1) root.append(svg("polyline", { points: run.join(" "), fill: "none", stroke: colour, "stroke-width": 2 }));
      run = [];
    };
    s.xs.forEach((x, i) => {
      const y = s.ys[i];
      if (missing(y)) return flush();
      run.push(`${px(x).toFixed(1)},${py(y).toFixed(1)}`);
      if (points) root.append(svg("circle", { cx: px(x), cy: py(y), r: 3, fill: s.colours ? s.colours[i] : colour }));
    });
    flush();
    const perRow = series.length === 1 ? 1 : series.length === 2 ? 2 : 3;
    const room = Math.floor((W - L) / perRow / 6.5) - 3; // characters that fit in a legend slot
    const legendX = L + (index % perRow) * Math.floor((W - L) / perRow);
    const legendY = H - 18 + Math.floor(index / perRow) * 13;
    const label = s.name.length > room ? s.name.slice(0, room - 1) + "…" : s.name;
    root.append(svg("rect", { x: legendX, y: legendY - 8, width: 10, height: 10, fill: colour }));
    root.append(svg("text", { x: legendX + 14, y: legendY + 1, class: "legend", text: label }, svg("title", { text: s.name })));
  });
}

/** The smallest of 1, 2, 2.5 or 5 times a power of ten at or above `value`: a round top. */
function niceCeiling(value) {
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function renderCharts() {
  const vertices = (state.metrics && state.metrics.vertices) || [];
  const sinks = new Set(graphOf(state.job || {}).edges.map((e) => e.from));
  const throughput = vertices.map((v) => {
    const h = v.history || {};
    const isSink = sinks.size ? !sinks.has(String(v.id)) : (v.metrics || {}).records_out === 0;
    const ys = (isSink ? h.records_in_per_second : h.records_out_per_second) || [];
    return { name: v.name + (isSink ? " (in)" : ""), xs: h.time_ms || [], ys };
  });
  drawChart($("chart-throughput"), throughput);
  const lag = vertices.map((v) => ({ name: v.name, xs: (v.history || {}).time_ms || [], ys: (v.history || {}).watermark_lag_ms || [] }));
  drawChart($("chart-lag"), lag, { yFormat: fmtMs });
  const history = ((state.checkpoints && state.checkpoints.history) || []).slice().sort((a, b) => a.trigger_timestamp - b.trigger_timestamp);
  const finished = history.filter((c) => c.status !== "IN_PROGRESS");
  drawChart($("chart-checkpoints"), [{
    name: "end to end (failed in red)",
    xs: finished.map((c) => c.trigger_timestamp),
    ys: finished.map((c) => c.end_to_end_duration),
    colours: finished.map((c) => (c.status === "FAILED" ? "#d62728" : "#1f77b4")),
  }], { yFormat: fmtMs, points: true });
}

// ---- checkpoints -----------------------------------------------------------------------------

const SUMMARY_UNITS = { state_size: fmtBytes, checkpointed_size: fmtBytes, persisted_data: fmtBytes };

function renderCheckpoints() {
  const data = state.checkpoints;
  if (!data) {
    $("checkpoint-counts").textContent = "Checkpoint statistics are not available.";
    return;
  }
  const c = data.counts || {};
  $("checkpoint-counts").textContent =
    `Triggered ${c.total ?? "–"} · completed ${c.completed ?? "–"} · failed ${c.failed ?? "–"} · ` +
    `in progress ${c.in_progress ?? "–"} · restored ${c.restored ?? "–"}`;
  const latest = data.latest || {};
  const parts = [];
  if (latest.completed) parts.push(`last completed #${latest.completed.id} at ${fmtTime(latest.completed.completion_timestamp || latest.completed.latest_ack_timestamp)} in ${fmtMs(latest.completed.end_to_end_duration)}`);
  if (latest.failed) parts.push(`last failed #${latest.failed.id} (${latest.failed.failure_reason || "failed"})`);
  if (latest.restored) parts.push(`restored from #${latest.restored.id}${latest.restored.external_path ? " (" + latest.restored.external_path + ")" : ""}`);
  $("checkpoint-latest").textContent = parts.length ? parts.join(" · ") : "No checkpoint completed yet.";

  const summary = clear($("checkpoint-summary"));
  const columns = ["count", "min", "avg", "p50", "p99", "max"];
  summary.append(el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Figure" }), columns.map((k) => el("th", { scope: "col", text: k })))));
  const rows = el("tbody");
  for (const [figure, values] of Object.entries(data.summary || {})) {
    const format = SUMMARY_UNITS[figure] || fmtMs;
    rows.append(el("tr", {}, el("th", { scope: "row", text: figure.replaceAll("_", " ") }),
      columns.map((k) => el("td", { class: "num", text: k === "count" ? String(values.count ?? "–") : format(values[k]) }))));
  }
  summary.append(rows);

  const body = clear($("checkpoint-history").tBodies[0]);
  const all = (data.history || []).slice().sort((a, b) => b.id - a.id);
  const history = all.slice(0, HISTORY_ROWS);
  $("checkpoint-history-note").textContent = all.length > history.length ? `The newest ${history.length} of ${all.length}.` : "";
  for (const cp of history) {
    const open = el("button", { type: "button", class: "link", "data-testid": `checkpoint-open-${cp.id}`, text: "#" + cp.id, "aria-label": `details of checkpoint ${cp.id}`, onclick: () => showCheckpoint(cp.id) });
    const where = cp.status === "FAILED" ? (cp.failure_reason || "") + (cp.failure_message ? ": " + cp.failure_message : "") : lastPart(cp.external_path);
    body.append(el("tr", { "data-testid": `checkpoint-row-${cp.id}`, "data-status": cp.status, class: "status-" + String(cp.status).toLowerCase() },
      el("th", { scope: "row" }, open),
      el("td", { text: cp.status }),
      el("td", { text: cp.is_savepoint ? "savepoint" + (cp.is_final ? " (final)" : "") : "checkpoint" }),
      el("td", { text: fmtTime(cp.trigger_timestamp) }),
      el("td", { class: "num", text: fmtMs(cp.end_to_end_duration) }),
      el("td", { class: "num", text: fmtMs(cp.duration) }),
      el("td", { class: "num", text: fmtBytes(cp.state_size) }),
      el("td", { class: "num", "data-testid": `checkpoint-checkpointed-${cp.id}`, text: fmtBytes(cp.checkpointed_size ?? cp.state_size) }),
      el("td", { class: "num", text: fmtBytes(cp.persisted_data) }),
      el("td", { class: "num", text: fmtMs(cp.sync_duration_max) }),
      el("td", { class: "num", text: fmtMs(cp.async_duration_max) }),
      el("td", { class: "num", text: fmtMs(cp.alignment_duration_max) }),
      el("td", { class: "num", text: fmtMs(cp.start_delay_max) }),
      el("td", { class: "num", text: `${cp.num_acknowledged_subtasks ?? "–"}/${cp.num_subtasks ?? "–"}` }),
      el("td", { class: "path", title: cp.external_path || null, text: where })));
  }
  if (!history.length) body.append(el("tr", {}, el("td", { colspan: 15, class: "muted", text: "No checkpoint yet." })));
}

async function showCheckpoint(id) {
  state.shownCheckpoint = id;
  const box = $("checkpoint-details");
  box.hidden = false;
  clear(box).append(el("p", { class: "muted", text: `Loading checkpoint ${id}…` }));
  const answer = await getJson(jobPath(`/checkpoints/details/${id}`));
  if (state.shownCheckpoint !== id) return;
  clear(box);
  const close = el("button", { type: "button", class: "link", text: "close", onclick: () => { box.hidden = true; state.shownCheckpoint = null; } });
  box.append(el("h3", {}, `Checkpoint #${id}, per subtask `, close));
  if (!answer.ok) {
    box.append(el("p", { class: "error", text: errorText(answer) }));
    return;
  }
  if (answer.body.external_path) box.append(el("p", {}, "Stored at ", el("code", { text: answer.body.external_path })));
  for (const task of Object.values(answer.body.tasks || {})) {
    const table = el("table", { "data-testid": `checkpoint-task-${task.id}` },
      el("caption", { text: `${task.name}: ${task.num_acknowledged_subtasks}/${task.num_subtasks} acknowledged, ${fmtBytes(task.state_size)} state, ${fmtBytes(task.checkpointed_size ?? task.state_size)} checkpointed, ${fmtMs(task.end_to_end_duration)} end to end` }),
      el("thead", {}, el("tr", {}, ["Subtask", "Status", "Acknowledged", "End to end", "State size", "Checkpointed", "Sync", "Async", "Alignment", "Persisted in flight", "Start delay", "Unaligned"].map((t) => el("th", { scope: "col", text: t })))));
    const rows = el("tbody");
    for (const s of task.subtasks || []) {
      if (s.status === "completed") {
        rows.append(el("tr", {}, el("th", { scope: "row", text: s.index }), el("td", { text: s.status }),
          el("td", { text: fmtTime(s.ack_timestamp) }), el("td", { class: "num", text: fmtMs(s.end_to_end_duration) }),
          el("td", { class: "num", text: fmtBytes(s.state_size) }),
          el("td", { class: "num", text: fmtBytes(s.checkpointed_size ?? s.state_size) }),
          el("td", { class: "num", text: fmtMs((s.checkpoint || {}).sync) }), el("td", { class: "num", text: fmtMs((s.checkpoint || {}).async) }),
          el("td", { class: "num", text: fmtMs((s.alignment || {}).duration) }), el("td", { class: "num", text: fmtBytes((s.alignment || {}).persisted) }),
          el("td", { class: "num", text: fmtMs(s.start_delay) }), el("td", { text: s.unaligned_checkpoint ? "yes" : "no" })));
      } else {
        const why = s.status === "declined" ? `${s.reason}: ${s.message || ""}` : "";
        rows.append(el("tr", {}, el("th", { scope: "row", text: s.index }), el("td", { text: s.status }), el("td", { colspan: 10, text: why })));
      }
    }
    table.append(rows);
    box.append(el("div", { class: "table-wrap" }, table));
  }
}

/** A checkpoint folder's own name (`chk-7`, `savepoint-…`); the full path is its title. */
function lastPart(path) {
  if (!path) return "";
  const parts = String(path).replace(/\/+$/, "").split("/");
  return parts[parts.length - 1];
}

// ---- exceptions, configuration, logs ---------------------------------------------------------

function pick(object, names) {
  for (const name of names) if (object && object[name] !== undefined && object[name] !== null) return object[name];
  return null;
}

function renderExceptions(answer) {
  const box = clear($("exceptions"));
  if (!answer.ok || !answer.body) {
    box.append(el("p", { class: "muted", text: unavailableText(answer) }));
    return;
  }
  const body = answer.body;
  const history = body.exceptionHistory || body["exception-history"] || {};
  const entries = pick(history, ["entries"]) || pick(body, ["entries", "history", "exceptions", "all-exceptions"]) || [];
  const rest = {};
  for (const [key, value] of Object.entries(body)) {
    if (!["exceptionHistory", "exception-history", "entries", "history", "exceptions", "all-exceptions", "root-exception", "timestamp", "truncated"].includes(key)) rest[key] = value;
  }
  const strategy = rest.restart_strategy && typeof rest.restart_strategy === "object" && Object.keys(rest).length === 1 ? rest.restart_strategy : rest;
  if (Object.keys(strategy).length) {
    box.append(el("h3", { text: "Restart strategy" }));
    const holder = el("div", { "data-testid": "restart-strategy" });
    renderKeyValues(holder, strategy);
    box.append(holder);
  }
  if (!entries.length) {
    box.append(el("p", { class: "muted", "data-testid": "no-exceptions", text: "No failure so far." }));
    return;
  }
  const list = el("ol", { class: "exceptions", reversed: true }); // newest first
  for (const entry of entries) {
    const when = pick(entry, ["timestamp", "timestamp_ms", "time"]);
    const name = pick(entry, ["exceptionName", "exception", "name", "class"]);
    const message = pick(entry, ["root_cause", "root-cause", "message", "summary"]);
    const task = pick(entry, ["taskName", "task"]);
    const attempt = pick(entry, ["attempt"]);
    const recovery = pick(entry, ["recovery"]);
    const delay = pick(entry, ["delay_ms", "delay"]);
    const explanation = pick(entry, ["explanation"]);
    const trace = pick(entry, ["stacktrace", "stack-trace", "traceback"]);
    const head = [fmtTime(when), attempt !== null ? `attempt ${attempt}` : null, name, task].filter(Boolean).join(" · ");
    const item = el("li", { "data-testid": "exception-entry" },
      el("p", {}, el("strong", { text: head })),
      message ? el("p", { text: message }) : null,
      recovery || explanation ? el("p", { class: "muted", text: [recovery ? `recovery: ${recovery}` : null, delay !== null ? `after ${fmtMs(delay)}` : null, explanation].filter(Boolean).join(" · ") }) : null,
      trace ? el("details", {}, el("summary", { text: "traceback" }), el("pre", { text: trace })) : null);
    list.append(item);
  }
  box.append(list);
  if (body.truncated || history.truncated) box.append(el("p", { class: "muted", text: "Older failures were dropped." }));
}

function flatten(value, prefix, out) {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, inner] of Object.entries(value)) flatten(inner, prefix ? `${prefix}.${key}` : key, out);
  } else {
    out.push([prefix, Array.isArray(value) ? JSON.stringify(value) : value]);
  }
  return out;
}

function renderKeyValues(box, object) {
  clear(box);
  if (!object) {
    box.append(el("p", { class: "muted", text: "Not available on this endpoint." }));
    return;
  }
  const rows = flatten(object, "", []);
  const table = el("table", { class: "kv" }, el("tbody", {}, rows.map(([key, value]) =>
    el("tr", {}, el("th", { scope: "row", text: key }), el("td", { text: value === null || value === undefined ? "–" : String(value) })))));
  box.append(table);
}

function renderLogs(answer) {
  const list = clear($("logs"));
  if (!answer.ok || !answer.body) {
    list.append(el("li", { class: "muted", text: unavailableText(answer) }));
    return;
  }
  const entries = Array.isArray(answer.body) ? answer.body : answer.body.logs || [];
  if (!entries.length) list.append(el("li", { class: "muted", text: "No log file yet." }));
  for (const entry of entries) {
    const name = typeof entry === "string" ? entry : entry.name;
    const href = (typeof entry === "object" && (entry.url || entry.href)) || jobPath("/logs/" + encodeURIComponent(name));
    const size = typeof entry === "object" && !missing(entry.size) ? ` (${fmtBytes(entry.size)})` : "";
    const link = el("a", { href, target: "_blank", rel: "noopener", "data-testid": "log-link", text: name });
    link.addEventListener("click", (event) => openLog(event, href));
    list.append(el("li", {}, link, size));
  }
}

// A log file needs the token, which a plain link cannot send: fetch it with the token and
// show the text in a new tab.
async function openLog(event, href) {
  event.preventDefault();
  const headers = token() ? { Authorization: "Bearer " + token() } : {};
  const response = await fetch(href, { headers, cache: "no-store" });
  const text = response.ok ? await response.text() : errorText({ status: response.status, body: await response.json().catch(() => null) });
  const url = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
  window.open(url, "_blank", "noopener");
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// ---- actions ---------------------------------------------------------------------------------

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
  $("token-state").textContent = value ? "Token set for this tab." : "No token: actions will be refused.";
}

function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const given = params.get("token");
  if (given) {
    setToken(given);
    history.replaceState(null, "", location.pathname + location.search); // keep it out of the address bar
  } else {
    setToken(token());
  }
}

async function act(method, path, body) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let answer = null;
  try {
    answer = await response.json();
  } catch (error) {
    answer = null;
  }
  return { ok: response.ok, status: response.status, body: answer };
}

function showResult(text, kind) {
  const node = $("action-result");
  node.textContent = text;
  node.className = kind || "";
}

async function savepointAction(kind) {
  if (!state.jobId) return;
  const dir = $("savepoint-dir").value.trim();
  if (kind === "stop" && !confirm("Stop the job with a savepoint?")) return;
  const answer = kind === "stop"
    ? await act("POST", jobPath("/stop"), dir ? { targetDirectory: dir, drain: false } : { drain: false })
    : await act("POST", jobPath("/savepoints"), dir ? { "target-directory": dir } : {});
  if (!answer.ok) {
    showResult(`The ${kind === "stop" ? "stop" : "savepoint"} was refused: ${errorText(answer)}`, "error");
    return;
  }
  const operation = { kind, requestId: answer.body["request-id"], status: "IN_PROGRESS", location: null, failure: null };
  state.operations.unshift(operation);
  showResult(`${kind === "stop" ? "Stop with savepoint" : "Savepoint"} ${operation.requestId} in progress…`, "");
  renderSavepoints();
  await followOperation(operation);
}

async function followOperation(operation) {
  for (;;) {
    let answer;
    try {
      answer = await getJson(jobPath("/savepoints/" + encodeURIComponent(operation.requestId)));
    } catch (error) {
      operation.status = "UNKNOWN";
      operation.failure = "the endpoint went away: " + error.message;
      break;
    }
    if (!answer.ok) {
      operation.status = "UNKNOWN";
      operation.failure = errorText(answer);
      break;
    }
    if (answer.body.status.id === "COMPLETED") {
      const result = answer.body.operation || {};
      operation.status = result.location ? "COMPLETED" : "FAILED";
      operation.location = result.location || null;
      operation.failure = result["failure-cause"] ? result["failure-cause"]["stack-trace"] : null;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  const what = operation.kind === "stop" ? "Stop with savepoint" : "Savepoint";
  const node = $("action-result");
  clear(node);
  if (operation.status === "COMPLETED") {
    node.className = "ok";
    node.append(`${what} completed: `, el("code", { "data-testid": "savepoint-path", text: operation.location }));
  } else {
    showResult(`${what} ${operation.requestId} failed: ${operation.failure}`, "error");
  }
  renderSavepoints();
}

async function cancelJob() {
  if (!state.jobId || !confirm("Cancel the job? It ends CANCELED, without a savepoint.")) return;
  const answer = await act("PATCH", jobPath("?mode=cancel"));
  showResult(answer.ok ? "Cancel requested." : `The cancel was refused: ${errorText(answer)}`, answer.ok ? "ok" : "error");
}

function renderSavepoints() {
  const list = clear($("savepoints"));
  const seen = new Set();
  for (const op of state.operations) {
    if (op.location) seen.add(op.location);
    const text = op.status === "COMPLETED" ? op.location : op.status === "IN_PROGRESS" ? "in progress…" : `failed: ${op.failure}`;
    list.append(el("li", { "data-testid": "savepoint-entry", "data-status": op.status },
      el("span", { class: "muted", text: `${op.kind === "stop" ? "stop" : "savepoint"} ${op.requestId}: ` }), el("code", { text })));
  }
  const history = ((state.checkpoints && state.checkpoints.history) || []).filter((c) => c.is_savepoint && c.status === "COMPLETED");
  for (const cp of history.sort((a, b) => b.id - a.id)) {
    if (cp.external_path && seen.has(cp.external_path)) continue;
    list.append(el("li", { "data-testid": "savepoint-entry", "data-status": "COMPLETED" },
      el("span", { class: "muted", text: `#${cp.id} at ${fmtTime(cp.completion_timestamp || cp.latest_ack_timestamp)}: ` }), el("code", { text: cp.external_path || "" })));
  }
  if (!list.childElementCount) list.append(el("li", { class: "muted", text: "None yet." }));
}

// ---- start -----------------------------------------------------------------------------------

function start() {
  tokenFromFragment();
  window.addEventListener("hashchange", tokenFromFragment); // a link with #token= opened here
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken($("token-input").value.trim());
    $("token-input").value = "";
  });
  $("trigger-savepoint").addEventListener("click", () => savepointAction("savepoint"));
  $("stop-savepoint").addEventListener("click", () => savepointAction("stop"));
  $("cancel-job").addEventListener("click", cancelJob);
  poll();
  setInterval(poll, POLL_MS);
}

document.addEventListener("DOMContentLoaded", start);
