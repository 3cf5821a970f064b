// A run's page: its facts, steering buttons, charts that grow as the run trains (fed by
// the live WebSocket), events and config. The chart controls (a line per rank or bands, the
// x axis, log scales, smoothing) hold across live updates and reconnects.
import { getJson, send, liveSocket, el, format } from "/api.js";
import { lineChart, setLines, smooth, palette } from "/charts.js";

const keys = ["loss", "lr", "grad_norm", "tokens_per_s", "mfu", "mem_used", "fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "data_ms"];
const perRankCharts = [
  { key: "loss", title: "Loss" },
  { key: "lr", title: "Learning rate" },
  { key: "grad_norm", title: "Gradient norm" },
  { key: "tokens_per_s", title: "Tokens/s" },
  { key: "mfu", title: "MFU" },
  { key: "mem_used", title: "Memory used (bytes)" },
];
const splitKeys = ["fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "data_ms"];
// The system panel: rank 0's machine readings over time (GPU ones are absent on the CPU).
const systemKeys = [["cpu_percent", "CPU %"], ["gpu_util", "GPU util %"], ["gpu_temp_c", "GPU °C"]];
const xAxes = [["step", "step"], ["tokens", "tokens"], ["time", "wall time"]];

export function renderRun(view, run, settings = { bands: false, x: "step", smoothing: 0, logY: { loss: true } }) {
  const series = {};  // key -> rank -> {steps, times, ys}: the values as the store holds them
  const tokensAt = new Map();  // step -> tokens the run had consumed by then
  let tokensPerStep = 1;  // for a step without its count: the config's, then the rows'
  const valid = { steps: [], times: [], ys: [] };
  const system = [];  // rank 0's system rows
  const eventRows = [];  // oldest first, marked on the charts
  let charts = [];
  let socket = null;
  let closed = false;
  let redrawPending = false;

  const title = el("h1", {}, run);
  const facts = el("div", { class: "facts" });
  const status = el("span", { id: "run-status", class: "status" });
  const message = el("span", { id: "steer-message", class: "muted" });
  const chartBox = el("div", { class: "charts", id: "charts" });
  const eventList = el("ul", { class: "events", id: "events" });
  const config = el("pre", { class: "config" });
  const steer = el("div", { class: "steer" });

  const lineMode = el("select", { id: "chart-lines", onchange: () => { settings.bands = lineMode.value === "bands"; build(); } },
    el("option", { value: "ranks" }, "a line per rank"), el("option", { value: "bands" }, "min–max band and mean"));
  const xAxis = el("select", { id: "chart-x", onchange: () => { settings.x = xAxis.value; build(); } },
    ...xAxes.map(([value, label]) => el("option", { value }, label)));
  const smoothingValue = el("output", { id: "chart-smoothing-value" });
  const smoothing = el("input", { type: "range", id: "chart-smoothing", min: 0, max: 0.99, step: 0.01, oninput: () => {
    settings.smoothing = Number(smoothing.value);
    smoothingValue.textContent = settings.smoothing.toFixed(2);
    refresh();
  } });
  lineMode.value = settings.bands ? "bands" : "ranks";
  xAxis.value = settings.x;
  smoothing.value = settings.smoothing;
  smoothingValue.textContent = settings.smoothing.toFixed(2);
  const controls = el("div", { class: "controls", id: "chart-controls" }, "lines ", lineMode, "x axis ", xAxis,
    el("label", {}, "smoothing ", smoothing, " ", smoothingValue));
  view.append(title, facts, steer, controls, chartBox, el("h2", {}, "Events"), eventList, el("h2", {}, "Config"), config);

  function push(line, step, time, value) {
    line.steps.push(step);
    line.times.push(time);
    line.ys.push(value);
  }

  function add(key, row) {
    if (row[key] == null) return;
    push(((series[key] ||= {})[row.rank] ||= { steps: [], times: [], ys: [] }), row.step, row.time, row[key]);
  }

  function noteTokens(step, tokens) {
    if (!(tokens > 0)) return;
    tokensAt.set(step, tokens);
    if (step > 0) tokensPerStep = tokens / step;
  }

  // A step's place on the chosen x axis.
  function xOf(step, time) {
    if (settings.x === "time") return time;
    if (settings.x === "tokens") return tokensAt.get(step) ?? step * tokensPerStep;
    return step;
  }

  // A stored line as drawn: on the chosen x axis, smoothed.
  function shown(line) {
    return { xs: line.steps.map((step, i) => xOf(step, line.times[i])), ys: smooth(line.ys, settings.smoothing) };
  }

  // The rank with the lowest tokens/s at its latest step, when there are several.
  function slowestRank() {
    const byRank = series.tokens_per_s || {};
    const ranks = Object.keys(byRank).map(Number);
    const last = (r) => byRank[r].ys[byRank[r].ys.length - 1];
    return ranks.length > 1 ? ranks.reduce((s, r) => (last(r) < last(s) ? r : s)) : -1;
  }

  // Across ranks, step by step: the max, mean and min lines, the band filled between the
  // first and the last.
  function bandLines(rankLines) {
    const byStep = new Map();  // step -> {time, values}
    for (const line of rankLines)
      line.steps.forEach((step, i) => {
        if (!byStep.has(step)) byStep.set(step, { time: line.times[i], values: [] });
        byStep.get(step).values.push(line.ys[i]);
      });
    const steps = [...byStep.keys()].sort((a, b) => a - b);
    const across = (f) => shown({ steps, times: steps.map((s) => byStep.get(s).time), ys: steps.map((s) => f(byStep.get(s).values)) });
    const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length;
    return [
      { label: "max", width: 1, stroke: palette[0], ...across((v) => Math.max(...v)) },
      { label: "mean", width: 2, stroke: palette[0], ...across(mean) },
      { label: "min", width: 1, stroke: palette[0], ...across((v) => Math.min(...v)) },
    ];
  }

  function linesOf(spec) {
    const byRank = series[spec.key] || {};
    const ranks = Object.keys(byRank).map(Number).sort((a, b) => a - b);
    const slowest = slowestRank();
    const lines = settings.bands ? bandLines(ranks.map((r) => byRank[r]))
      : ranks.map((r) => ({ label: `rank ${r}${r === slowest ? " (slowest)" : ""}`, width: r === slowest ? 3 : 1.5, ...shown(byRank[r]) }));
    if (spec.key === "loss") lines.push({ label: "valid", width: 2.5, ...shown(valid) });
    return lines;
  }

  function splitLines() {
    return splitKeys.map((k) => ({ label: k.replace("_ms", " ms"), ...shown((series[k] || {})[0] || { steps: [], times: [], ys: [] }) }));
  }

  function systemLines() {
    return systemKeys.map(([key, label]) => {
      const rows = system.filter((row) => row[key] != null);
      return { label, xs: rows.map((row) => row.time), ys: smooth(rows.map((row) => row[key]), settings.smoothing) };
    });
  }

  // The step an event without one happened at: the last logged step by its time.
  function stepAt(time) {
    const line = Object.values(series.loss || {})[0];
    if (!line) return null;
    let step = null;
    for (let i = 0; i < line.times.length && line.times[i] <= time; i++) step = line.steps[i];
    return step;
  }

  function eventMarks(byTime) {
    return eventRows.map((e) => {
      const step = e.step ?? stepAt(e.time);
      const x = byTime || settings.x === "time" ? e.time : step == null ? null : xOf(step, e.time);
      return { x, kind: e.kind, text: `${e.kind}${step == null ? "" : ` at step ${step}`}: ${e.message}` };
    });
  }

  function logToggle(name) {
    return el("label", { class: "log-toggle" }, el("input", { type: "checkbox", id: "log-" + name, checked: settings.logY[name] ? "" : null,
      onchange: (e) => { settings.logY[name] = e.target.checked; build(); } }), " log");
  }

  function addChart(name, title, lines, options = {}) {
    const chart = lineChart(chartBox, title, lines(), { id: "chart-" + name, logY: !!settings.logY[name], xAxis: settings.x,
      events: () => eventMarks(false), controls: logToggle(name), ...options });
    return { lines, chart };
  }

  function build() {
    chartBox.replaceChildren();
    charts = perRankCharts.map((spec) => addChart(spec.key, spec.title, () => linesOf(spec), { bands: settings.bands ? [[0, 2]] : [] }));
    charts.push(addChart("split", "Step time split, rank 0 (ms)", splitLines));
    charts.push(addChart("system", "System, rank 0", systemLines, { xAxis: "seconds", events: () => eventMarks(true) }));
  }

  // Redraws every chart with its lines now; rebuilds when a new rank or the first
  // validation row changes a chart's set of lines.
  function refresh() {
    for (const { lines: linesNow, chart } of charts) {
      const lines = linesNow();
      if (lines.length + 1 !== chart.series.length) return build();
      setLines(chart, lines);
    }
  }

  // Live rows arrive several times a second; the charts redraw at most every 250 ms.
  function redraw() {
    if (redrawPending) return;
    redrawPending = true;
    setTimeout(() => {
      redrawPending = false;
      refresh();
    }, 250);
  }

  function showEvent(e) {
    eventRows.push(e);
    eventList.prepend(el("li", {}, `${format.time(e.time)} `, e.step != null ? `step ${e.step} ` : "", el("b", {}, e.kind), ` ${e.message}`));
  }

  function showRun(r) {
    status.textContent = r.status;
    status.className = `status status-${r.status}`;
    facts.replaceChildren(el("span", {}, "status ", status),
      el("span", {}, `layout ${r.layout || "—"}`), el("span", {}, `${r.backend} · ${r.device || "—"}`),
      el("span", {}, `started ${format.time(r.started_at)}`), el("span", {}, `last step ${r.last_step ?? "—"}`),
      el("a", { href: `/api/runs/${r.id}/export.csv` }, "export CSV"));
    for (const b of steer.querySelectorAll("button")) b.disabled = !(r.status === "running" || r.status === "paused");
  }

  function steerButton(label, action, ask) {
    return el("button", { id: "steer-" + action, onclick: async () => {
      let body = { action };
      if (action === "set") {
        const lr = prompt("New peak learning rate (train.lr):");
        if (!lr) return;
        body.setting = `train.lr=${lr}`;
      } else if (!confirm(ask)) {
        return;
      }
      try {
        const c = await send("POST", `/api/runs/${encodeURIComponent(run)}/commands`, body);
        message.textContent = `queued ${c.action} as command ${c.id}; it applies at the next step boundary`;
      } catch (e) {
        message.textContent = e.message;
      }
    } }, label);
  }
  steer.append(steerButton("Pause", "pause", `Pause ${run}?`), steerButton("Resume", "resume", `Resume ${run}?`),
    steerButton("Checkpoint now", "checkpoint", `Write a checkpoint of ${run} now?`),
    steerButton("Set learning rate", "set"), steerButton("Stop", "stop", `Stop ${run}? It ends as stopped.`), message);

  async function start() {
    const details = await getJson(`/api/runs/${encodeURIComponent(run)}?events=200`);
    title.textContent = details.name;
    showRun(details);
    details.events.forEach(showEvent);
    const c = details.config || {};
    if (c.train?.global_batch && c.model?.seq_len) tokensPerStep = c.train.global_batch * c.model.seq_len;
    config.textContent = JSON.stringify(details.config, null, 2);
    socket = liveSocket(run);
    socket.onmessage = async (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type === "hello") {
        const to = msg.last_step == null ? -1 : msg.last_step;
        const [history, validRows, systemRows] = await Promise.all([
          getJson(`/api/runs/${details.id}/metrics?keys=${keys.join(",")},tokens&to=${to}&points=2000`),
          getJson(`/api/runs/${details.id}/valid`), getJson(`/api/runs/${details.id}/system`)]);
        const newer = system.splice(0);
        for (const row of systemRows) if (row.rank === 0 && row.time <= msg.last_system_time) system.push(row);
        system.push(...newer);
        // The history goes before the rows that arrived while it loaded.
        for (const r of history.series.tokens) r.step.forEach((step, i) => noteTokens(step, r.value[i]));
        for (const key of keys)
          for (const r of history.series[key]) {
            const newer = (series[key] ||= {})[r.rank] || { steps: [], times: [], ys: [] };
            series[key][r.rank] = { steps: [...r.step, ...newer.steps], times: [...r.time, ...newer.times], ys: [...r.value, ...newer.ys] };
          }
        const older = { steps: [], times: [], ys: [] };
        for (const v of validRows) if (v.step <= (msg.last_valid_step ?? -1) && v.loss != null) push(older, v.step, v.time, v.loss);
        for (const k of ["steps", "times", "ys"]) valid[k].unshift(...older[k]);
        build();
      } else if (msg.type === "metrics") {
        for (const row of msg.rows) {
          for (const key of keys) add(key, row);
          noteTokens(row.step, row.tokens);
        }
        redraw();
      } else if (msg.type === "valid") {
        for (const v of msg.rows) if (v.loss != null) push(valid, v.step, v.time, v.loss);
        redraw();
      } else if (msg.type === "system") {
        system.push(...msg.rows.filter((row) => row.rank === 0));
        redraw();
      } else if (msg.type === "events") {
        msg.events.forEach(showEvent);
        redraw();
      } else if (msg.type === "status") {
        showRun(msg.run);
      }
    };
    socket.onclose = () => { if (!closed) setTimeout(() => { if (!closed) { view.replaceChildren(); renderRun(view, run, settings); } }, 2000); };
  }

  start().catch((e) => view.append(el("p", { class: "error" }, e.message)));
  return () => { closed = true; if (socket) socket.close(); };
}
