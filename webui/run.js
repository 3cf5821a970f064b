// A run's page: its facts (progress against the planned steps, elapsed time, ETA), steering
// buttons, charts that grow as the run trains (fed by the live WebSocket), the routing of its
// mixture-of-experts layers when it has any, the text the model wrote at its validation
// steps, events and config. The chart controls (a line per rank or
// bands, the x axis, log scales, smoothing) hold across live updates and reconnects. A run of
// a store the server shows read-only is read and followed alike; its buttons stay disabled.
import { getJson, send, liveSocket, el, format } from "/api.js";
import { lineChart, setLines, smooth, palette } from "/charts.js";
import { xAxisSelect, smoothingControl, logToggle } from "/chart_controls.js";
import { progressFacts } from "/run_progress.js";
import { planFacts, planSpans } from "/run_plan.js";
import { samplesSection } from "/run_samples.js";
import { expertsSection } from "/run_experts.js";
import { systemPanels, cpuNote } from "/run_system.js";
import { ranksSection } from "/run_ranks.js";
import { alertsSection } from "/run_alerts.js";
import { lineageSection } from "/run_lineage.js";
import { fieldsIn, namesIn, slowEnd } from "/metric_fields.js";

// The keys the page reads: its own charts' and the time split's.
const keys = namesIn("run_chart", "time_split", "time_within");
// What a chart of the list says beyond its title.
const chartNotes = {
  mfu: { gpuOnly: true, empty: "not measured: no known peak FLOP/s for this device" },
  mem_used: { cpuTitle: "Memory used, resident (bytes)" },
};
const perRankCharts = fieldsIn("run_chart").map((f) => ({ key: f.name, title: f.title, ...chartNotes[f.name] }));
// The parts of the step's time, and those within them (a2a_ms, expert parallelism's
// all-to-alls, is part of fwd_ms and bwd_ms), drawn beside them where measured.
const splitKeys = namesIn("time_split", "time_within");
const withinKeys = namesIn("time_within");
const xAxes = [["step", "step"], ["tokens", "tokens"], ["time", "wall time"]];

export function renderRun(view, run, settings = { bands: false, x: "step", smoothing: 0, logY: { loss: true } }) {
  const series = {};  // key -> rank -> {steps, times, ys}: the values as the store holds them
  // A wide run's per-rank fields (the metrics answer has a spread): key -> {steps, times, min,
  // mean, max, slowRank, slow}, across ranks step by step; series then holds rank 0 alone.
  const spreads = {};
  const tokensAt = new Map();  // step -> tokens the run had consumed by then
  let tokensPerStep = 1;  // for a step without its count: the config's, then the rows'
  const valid = { steps: [], times: [], ys: [] };
  const system = [];  // rank 0's system rows
  const eventRows = [];  // oldest first, marked on the charts
  let rewinds = [];  // the run's rewinds past loss spikes, each with rank 0's abandoned losses
  let record = null;  // the run as last heard of
  let plannedSteps = null;  // train.steps of its config
  let startTime = 0;  // the system panels' zero
  let charts = [];
  let socket = null;
  let closed = false;
  let redrawPending = false;

  const title = el("h1", {}, run);
  const facts = el("div", { class: "facts" });
  const status = el("span", { id: "run-status", class: "status" });
  const progress = el("span", { id: "run-progress" });
  const elapsed = el("span", { id: "run-elapsed" });
  const eta = el("span", { id: "run-eta" });
  const plan = el("span", { id: "run-plan", class: "facts" });
  const message = el("span", { id: "steer-message", class: "muted" });
  const hiddenPanels = el("p", { id: "hidden-panels", class: "muted", hidden: "" });
  const chartBox = el("div", { class: "charts", id: "charts" });
  const samplesBox = el("div");
  const eventList = el("ul", { class: "events", id: "events" });
  const config = el("pre", { class: "config" });
  const steer = el("div", { class: "steer" });
  let samples = null;
  const experts = expertsSection();
  // The slowest rank as the store names it (GET /api/runs/{run}/ranks, read by the Ranks
  // panel): the charts label the same rank as the panel highlights.
  let slowestRank = null;
  const ranks = ranksSection(encodeURIComponent(run), (rank) => {
    slowestRank = rank;
    refresh();
  });
  const alerts = alertsSection(encodeURIComponent(run));
  const lineage = lineageSection();

  const lineMode = el("select", { id: "chart-lines", onchange: () => { settings.bands = lineMode.value === "bands"; build(); } },
    el("option", { value: "ranks" }, "a line per rank"), el("option", { value: "bands" }, "min–max band and mean"));
  lineMode.value = settings.bands ? "bands" : "ranks";
  const controls = el("div", { class: "controls", id: "chart-controls" }, "lines ", lineMode,
    "x axis ", xAxisSelect(settings, xAxes, build), smoothingControl(settings, refresh));
  view.append(title, facts, lineage.element, steer, alerts.element, controls, hiddenPanels, chartBox, ranks.element, experts.element, el("h2", {}, "Samples"), samplesBox,
    el("h2", {}, "Events"), eventList, el("h2", {}, "Config"), config);

  function push(line, step, time, value) {
    line.steps.push(step);
    line.times.push(time);
    line.ys.push(value);
  }

  function add(key, row) {
    if (row[key] == null) return;
    push(((series[key] ||= {})[row.rank] ||= { steps: [], times: [], ys: [] }), row.step, row.time, row[key]);
  }

  // The spread as the API's columns name it (GET /api/runs/{run}/metrics' and the live
  // metrics message's), as the page keeps it.
  const spreadOf = (s) => ({ steps: s.step, times: s.time, min: s.min, mean: s.mean, max: s.max, slowRank: s.slowest_rank, slow: s.slowest });

  // A live metrics message's spread: its wide steps, a point each, after those already held.
  // The page's first spread turns the run wide, as its history would have (rank 0's rows
  // alone); returns whether it did, so the charts are built again as bands.
  function addSpread(spread) {
    const turned = Object.keys(spreads).length === 0 && keys.some((key) => spread[key]);
    for (const key of keys) {
      if (!spread[key]) continue;
      const held = (spreads[key] ||= spreadOf({ step: [], time: [], min: [], mean: [], max: [], slowest_rank: [], slowest: [] }));
      const fresh = spreadOf(spread[key]);
      const last = held.steps[held.steps.length - 1] ?? -Infinity;
      fresh.steps.forEach((step, i) => {
        if (step > last) for (const k of Object.keys(held)) held[k].push(fresh[k][i]);
      });
    }
    if (turned) keepRankZero();
    return turned;
  }

  // A wide run's series hold rank 0 alone, as the API answers it: the spread stands for the others.
  function keepRankZero() {
    for (const key of Object.keys(series)) series[key] = { 0: series[key][0] || { steps: [], times: [], ys: [] } };
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

  // A wide run's spread as the store keeps it: the band from min to max, the mean, and at the
  // slow end (the max of a time, the min of a throughput) the slowest rank in the legend.
  function spreadLines(key) {
    const s = spreads[key];
    const low = slowEnd(key) === "low";
    const line = (label, ys, width, slow) => ({ label: slow ? `${label}, slowest rank` : label, width, stroke: palette[0],
      ...shown({ steps: s.steps, times: s.times, ys }), ...(slow ? { notes: s.slowRank.map((r) => `rank ${r}`) } : {}) });
    return [line("max", s.max, 1, !low), line("mean", s.mean, 2, false), line("min", s.min, 1, low)];
  }

  function linesOf(spec) {
    if (spreads[spec.key]) return spreadLines(spec.key);
    const byRank = series[spec.key] || {};
    const ranks = Object.keys(byRank).map(Number).sort((a, b) => a - b);
    const lines = settings.bands ? bandLines(ranks.map((r) => byRank[r]))
      : ranks.map((r) => ({ label: `rank ${r}${r === slowestRank ? " (slowest)" : ""}`, width: r === slowestRank ? 3 : 1.5, ...shown(byRank[r]) }));
    if (spec.key === "loss") {
      lines.push({ label: "valid", width: 2.5, ...shown(valid) });
      // A fork's curve continues its parents': theirs up to the steps it branched at.
      for (const s of lineage.segments()) lines.push({ label: `${s.name} (parent)`, width: 1.5, dash: [6, 4], ...shown(s) });
      // What a rewind past a loss spike abandoned: rank 0's colour, dimmed.
      for (const r of rewinds)
        lines.push({ label: `abandoned (rewind ${r.number})`, width: 1.5, stroke: palette[0] + "59",
          ...shown({ steps: r.losses.step, times: r.losses.time, ys: r.losses.loss }) });
    }
    return lines;
  }

  function splitLines() {
    const rank0 = (k) => (series[k] || {})[0] || { steps: [], times: [], ys: [] };
    // The all-to-all line only where the run measured it (expert parallelism).
    const measured = (k) => !withinKeys.includes(k) || rank0(k).ys.some((y) => y != null && !Number.isNaN(y));
    return splitKeys.filter(measured).map((k) => ({ label: k.replace("_ms", " ms"), ...shown(rank0(k)) }));
  }

  function systemLines(panel) {
    return panel.keys.map(([key, label]) => {
      const rows = system.filter((row) => row[key] != null);
      return { label, dash: key === "host_mem_total" ? [6, 4] : undefined,
        xs: rows.map((row) => row.time - startTime), ys: smooth(rows.map((row) => row[key]), settings.smoothing) };
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

  function eventMarks(sinceStart) {
    return eventRows.map((e) => {
      const step = e.step ?? stepAt(e.time);
      const x = sinceStart ? e.time - startTime : settings.x === "time" ? e.time : step == null ? null : xOf(step, e.time);
      return { x, kind: e.kind, text: `${e.kind}${step == null ? "" : ` at step ${step}`}: ${e.message}` };
    });
  }

  // A chart whose lines are all empty says why in its title, when its spec knows.
  function addChart(name, titleText, lines, options = {}, empty) {
    const drawn = lines();
    const blank = empty && drawn.every((l) => l.xs.length === 0);
    const chart = lineChart(chartBox, blank ? `${titleText} — ${empty}` : titleText, drawn, { id: "chart-" + name,
      logY: !!settings.logY[name], xAxis: settings.x, events: () => eventMarks(false), controls: logToggle(settings, name, build), ...options });
    return { lines, chart, blank };
  }

  function build() {
    chartBox.replaceChildren();
    const onCpu = record?.backend === "cpu";
    hiddenPanels.hidden = !onCpu;
    hiddenPanels.textContent = onCpu ? cpuNote : "";
    charts = perRankCharts.filter((spec) => !(spec.gpuOnly && onCpu)).map((spec) =>
      addChart(spec.key, (onCpu && spec.cpuTitle) || spec.title, () => linesOf(spec),
        { bands: settings.bands || spreads[spec.key] ? [[0, 2]] : [] }, spec.empty));
    charts.push(addChart("split", "Step time split, rank 0 (ms)", splitLines));
    for (const panel of systemPanels(record?.backend))
      charts.push(addChart(panel.name, panel.title, () => systemLines(panel), { xAxis: "elapsed", events: () => eventMarks(true) }, panel.empty));
  }

  // Redraws every chart with its lines now; rebuilds when a new rank or the first
  // validation row changes a chart's set of lines, or an empty chart gets its first values.
  function refresh() {
    for (const { lines: linesNow, chart, blank } of charts) {
      const lines = linesNow();
      if (lines.length + 1 !== chart.series.length || (blank && lines.some((l) => l.xs.length))) return build();
      setLines(chart, lines);
    }
    showProgress();
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
    eventList.prepend(el("li", { class: e.kind === "alert" ? "event-alert" : null }, `${format.time(e.time)} `, e.step != null ? `step ${e.step} ` : "", el("b", {}, e.kind), ` ${e.message}`));
  }

  function showProgress() {
    if (!record) return;
    const line = Object.values(series.loss || {})[0] || { steps: [], times: [] };
    const f = progressFacts(record, plannedSteps, line, Date.now() / 1000);
    progress.textContent = f.progress;
    elapsed.textContent = f.elapsed;
    eta.textContent = f.eta;
    // Rank 0's latest step time and memory beside the plan.
    const last = (key) => {
      const ys = series[key]?.[0]?.ys;
      return ys?.length ? ys[ys.length - 1] : null;
    };
    plan.replaceChildren(...planSpans(planFacts(record, tokensPerStep, { tokens_per_s: last("tokens_per_s"), mem_used: last("mem_used"), rates: series.tokens_per_s?.[0]?.ys })));
  }

  function showRun(r) {
    record = r;
    status.textContent = r.status;
    status.className = `status status-${r.status}`;
    facts.replaceChildren(el("span", {}, "status ", status), progress, elapsed, eta, plan,
      el("span", {}, `layout ${r.layout || "—"}`), el("span", {}, `${r.backend} · ${r.device || "—"}`),
      el("span", {}, `started ${format.time(r.started_at)}`),
      ...(r.writable === false ? [el("span", { id: "run-store", title: "this server shows the run's store read-only: it cannot be steered or changed here" },
        `store ${r.store} (read-only)`)] : []),
      ...(r.goodput == null ? [] : [el("span", { title: "share of the run's wall clock spent in steps that survive (restarts, lost steps, start-up and checkpoints count against it)" },
        `goodput ${(r.goodput * 100).toFixed(1)}%`)]),
      el("a", { href: `/api/runs/${r.id}/export.csv` }, "export CSV"));
    showProgress();
    // Pause only a running run and resume only a paused one; the rest while it is live; none
    // for a run of a read-only store, which the server would refuse.
    const live = (r.status === "running" || r.status === "paused") && r.writable !== false;
    for (const b of steer.querySelectorAll("button")) b.disabled = !live;
    steer.querySelector("#steer-pause").disabled = !live || r.status !== "running";
    steer.querySelector("#steer-resume").disabled = !live || r.status !== "paused";
    if (r.writable === false) message.textContent = `read-only: store ${r.store} is shown, not served, by this dashboard`;
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
    steerButton("Set learning rate", "set"), steerButton("Stop", "stop", `Stop ${run}? It ends as stopped.`),
    steerButton("Release", "release", `Release ${run}? It writes a checkpoint, ends and frees its devices; kiln runs resume ${run} starts it again.`),
    message);

  // The elapsed time and ETA of a live run move between rows too.
  const ticker = setInterval(showProgress, 1000);

  async function start() {
    const details = await getJson(`/api/runs/${encodeURIComponent(run)}?events=200`);
    title.textContent = details.name;
    const c = details.config || {};
    plannedSteps = c.train?.steps ?? null;
    startTime = details.started_at ?? details.created_at;
    showRun(details);
    details.events.forEach(showEvent);
    rewinds = details.rewinds || [];
    // The parents' curves are drawn with the fork's; loaded before the charts are built.
    await lineage.load(details.lineage).catch(() => {});
    if (c.train?.global_batch && c.model?.seq_len) tokensPerStep = c.train.global_batch * c.model.seq_len;
    samples = samplesSection(c);
    samplesBox.replaceChildren(samples.element);
    config.textContent = JSON.stringify(details.config, null, 2);
    socket = liveSocket(run);
    socket.onmessage = async (m) => {
      const msg = JSON.parse(m.data);
      if (msg.type === "hello") {
        const to = msg.last_step == null ? -1 : msg.last_step;
        ranks.load();  // its own answers, asked beside the history's
        const [history, validRows, systemRows, sampleRows] = await Promise.all([
          getJson(`/api/runs/${details.id}/metrics?keys=${keys.join(",")},tokens&to=${to}&points=2000`),
          getJson(`/api/runs/${details.id}/valid`), getJson(`/api/runs/${details.id}/system`),
          getJson(`/api/runs/${details.id}/samples`)]);
        const newer = system.splice(0);
        for (const row of systemRows) if (row.rank === 0 && row.time <= msg.last_system_time) system.push(row);
        system.push(...newer);
        // The history goes before the rows that arrived while it loaded.
        for (const r of history.series.tokens) r.step.forEach((step, i) => noteTokens(step, r.value[i]));
        for (const [key, s] of Object.entries(history.spread || {})) {
          const newer = spreads[key];
          spreads[key] = spreadOf(s);
          // Live steps after the history's last (a reconnect's history repeats the earlier ones).
          const last = s.step[s.step.length - 1] ?? -Infinity;
          newer?.steps.forEach((step, i) => {
            if (step > last) for (const k of Object.keys(newer)) spreads[key][k].push(newer[k][i]);
          });
        }
        for (const key of keys)
          for (const r of history.series[key]) {
            const newer = (series[key] ||= {})[r.rank] || { steps: [], times: [], ys: [] };
            series[key][r.rank] = { steps: [...r.step, ...newer.steps], times: [...r.time, ...newer.times], ys: [...r.value, ...newer.ys] };
          }
        // Live rows of every rank of narrow steps that came before a wide run's history.
        if (Object.keys(spreads).length > 0) keepRankZero();
        const older = { steps: [], times: [], ys: [] };
        for (const v of validRows) if (v.step <= (msg.last_valid_step ?? -1) && v.loss != null) push(older, v.step, v.time, v.loss);
        for (const k of ["steps", "times", "ys"]) valid[k].unshift(...older[k]);
        samples.add(sampleRows.filter((s) => s.step <= (msg.last_sample_step ?? -Infinity)));
        build();
        showProgress();
        alerts.load();
        if (msg.last_expert_step != null)
          experts.load(await getJson(`/api/runs/${details.id}/experts?to=${msg.last_expert_step}`));
      } else if (msg.type === "metrics") {
        // A wide step comes as rank 0's row and its spread across ranks; a wide run keeps rank
        // 0's rows of any narrow step too, as its history does.
        const turnedWide = msg.spread ? addSpread(msg.spread) : false;
        const wide = Object.keys(spreads).length > 0;
        for (const row of msg.rows) {
          for (const key of keys) if (!wide || row.rank === 0) add(key, row);
          noteTokens(row.step, row.tokens);
        }
        record.last_step = Math.max(record.last_step ?? 0, ...msg.rows.map((row) => row.step));
        ranks.refresh();
        if (turnedWide) build();
        else redraw();
      } else if (msg.type === "valid") {
        for (const v of msg.rows) if (v.loss != null) push(valid, v.step, v.time, v.loss);
        redraw();
      } else if (msg.type === "samples") {
        samples.add(msg.rows);
      } else if (msg.type === "experts") {
        experts.add(msg.rows);
      } else if (msg.type === "system") {
        system.push(...msg.rows.filter((row) => row.rank === 0));
        redraw();
      } else if (msg.type === "events") {
        msg.events.forEach(showEvent);
        if (msg.events.some((e) => e.kind === "alert")) alerts.load();
        redraw();
      } else if (msg.type === "status") {
        showRun(msg.run);
      } else if (msg.type === "rewind") {
        // The run went back past a loss spike: its steps are read again from the store, the
        // abandoned ones among the rewinds.
        socket.onclose = null;
        socket.close();
        reload();
      }
    };
    // A lost connection reloads the page in place, with the same settings.
    socket.onclose = () => {
      if (!closed) setTimeout(() => {
        if (!closed) reload();
      }, 2000);
    };
  }

  let reloaded = null;  // the page that replaced this one, left with it
  function reload() {
    clearInterval(ticker);
    ranks.close();
    view.replaceChildren();
    reloaded = renderRun(view, run, settings);
  }
  start().catch((e) => view.append(el("p", { class: "error" }, e.message)));
  return () => {
    closed = true;
    clearInterval(ticker);
    ranks.close();
    if (socket) socket.close();
    if (reloaded) reloaded();
  };
}
