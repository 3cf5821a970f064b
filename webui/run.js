// A run's page: its facts, steering buttons, charts that grow as the run trains (fed by
// the live WebSocket), events and config.
import { getJson, send, liveSocket, el, format } from "/api.js";
import { lineChart, setLines } from "/charts.js";

const keys = ["loss", "lr", "grad_norm", "tokens_per_s", "mfu", "mem_used", "fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "data_ms"];
const perRankCharts = [
  { key: "loss", title: "Loss", logY: true },
  { key: "lr", title: "Learning rate" },
  { key: "grad_norm", title: "Gradient norm" },
  { key: "tokens_per_s", title: "Tokens/s", slowest: true },
  { key: "mfu", title: "MFU" },
  { key: "mem_used", title: "Memory used (bytes)" },
];
const splitKeys = ["fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "data_ms"];
// The system panel: rank 0's machine readings over time (GPU ones are absent on the CPU).
const systemKeys = [["cpu_percent", "CPU %"], ["gpu_util", "GPU util %"], ["gpu_temp_c", "GPU °C"]];

export function renderRun(view, run) {
  const series = {};  // key -> rank -> {xs, ys}
  const valid = { xs: [], ys: [] };
  const system = [];  // rank 0's system rows
  let charts = [];
  let socket = null;
  let closed = false;
  let redrawPending = false;

  const title = el("h1", {}, run);
  const facts = el("div", { class: "facts" });
  const status = el("span", { id: "run-status", class: "status" });
  const message = el("span", { id: "steer-message", class: "muted" });
  const chartBox = el("div", { class: "charts", id: "charts" });
  const events = el("ul", { class: "events" });
  const config = el("pre", { class: "config" });
  const steer = el("div", { class: "steer" });
  view.append(title, facts, steer, chartBox, el("h2", {}, "Events"), events, el("h2", {}, "Config"), config);

  function add(key, row) {
    const value = row[key];
    if (value == null) return;
    const byRank = (series[key] ||= {});
    const line = (byRank[row.rank] ||= { xs: [], ys: [] });
    line.xs.push(row.step);
    line.ys.push(value);
  }

  function linesOf(spec) {
    const byRank = series[spec.key] || {};
    const ranks = Object.keys(byRank).map(Number).sort((a, b) => a - b);
    let slowest = -1;
    if (spec.slowest && ranks.length > 1) {
      const last = (r) => byRank[r].ys[byRank[r].ys.length - 1];
      slowest = ranks.reduce((s, r) => (last(r) < last(s) ? r : s), ranks[0]);
    }
    const lines = ranks.map((r) => ({ label: `rank ${r}${r === slowest ? " (slowest)" : ""}`, width: r === slowest ? 3 : 1.5, ...byRank[r] }));
    if (spec.key === "loss") lines.push({ label: "valid", width: 2.5, ...valid });
    return lines;
  }

  function splitLines() {
    return splitKeys.map((k) => ({ label: k.replace("_ms", " ms"), ...((series[k] || {})[0] || { xs: [], ys: [] }) }));
  }

  function systemLines() {
    return systemKeys.map(([key, label]) => {
      const rows = system.filter((row) => row[key] != null);
      return { label, xs: rows.map((row) => row.time), ys: rows.map((row) => row[key]) };
    });
  }

  function build() {
    chartBox.replaceChildren();
    charts = perRankCharts.map((spec) => ({ spec, chart: lineChart(chartBox, spec.title, linesOf(spec), { logY: spec.logY, id: "chart-" + spec.key }) }));
    charts.push({ lines: splitLines, chart: lineChart(chartBox, "Step time split, rank 0 (ms)", splitLines(), { id: "chart-split" }) });
    charts.push({ lines: systemLines, chart: lineChart(chartBox, "System, rank 0", systemLines(), { id: "chart-system", xLabel: "seconds" }) });
  }

  // Live rows arrive several times a second; the charts redraw at most every 250 ms, and
  // rebuild when a new rank or the first validation row changes their set of lines.
  function redraw() {
    if (redrawPending) return;
    redrawPending = true;
    setTimeout(() => {
      redrawPending = false;
      for (const { spec, lines: linesFor, chart } of charts) {
        const lines = linesFor ? linesFor() : linesOf(spec);
        if (lines.length + 1 !== chart.series.length) return build();
        setLines(chart, lines);
      }
    }, 250);
  }

  function showEvent(e) {
    events.prepend(el("li", {}, `${format.time(e.time)} `, e.step != null ? `step ${e.step} ` : "", el("b", {}, e.kind), ` ${e.message}`));
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
    config.textContent = JSON.stringify(details.config, null, 2);
    socket = liveSocket(run);
    socket.onmessage = async (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type === "hello") {
        const to = msg.last_step == null ? -1 : msg.last_step;
        const [history, validRows, systemRows] = await Promise.all([
          getJson(`/api/runs/${details.id}/metrics?keys=${keys.join(",")}&to=${to}&points=2000`),
          getJson(`/api/runs/${details.id}/valid`), getJson(`/api/runs/${details.id}/system`)]);
        const newer = system.splice(0);
        for (const row of systemRows) if (row.rank === 0 && row.time <= msg.last_system_time) system.push(row);
        system.push(...newer);
        for (const [key, ranks] of Object.entries(history.series))
          for (const r of ranks) (series[key] ||= {})[r.rank] = { xs: [...r.step, ...((series[key] || {})[r.rank]?.xs || [])], ys: [...r.value, ...((series[key] || {})[r.rank]?.ys || [])] };
        for (const v of validRows) if (v.step <= (msg.last_valid_step ?? -1) && v.loss != null) { valid.xs.push(v.step); valid.ys.push(v.loss); }
        build();
      } else if (msg.type === "metrics") {
        for (const row of msg.rows) for (const key of keys) add(key, row);
        redraw();
      } else if (msg.type === "valid") {
        for (const v of msg.rows) if (v.loss != null) { valid.xs.push(v.step); valid.ys.push(v.loss); }
        redraw();
      } else if (msg.type === "system") {
        system.push(...msg.rows.filter((row) => row.rank === 0));
        redraw();
      } else if (msg.type === "events") {
        msg.events.forEach(showEvent);
      } else if (msg.type === "status") {
        showRun(msg.run);
      }
    };
    socket.onclose = () => { if (!closed) setTimeout(() => { if (!closed) { view.replaceChildren(); renderRun(view, run); } }, 2000); };
  }

  start().catch((e) => view.append(el("p", { class: "error" }, e.message)));
  return () => { closed = true; if (socket) socket.close(); };
}
