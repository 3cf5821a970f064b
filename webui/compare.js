// The compare page: a grid of the metrics that tell runs apart (loss, validation loss,
// learning rate, gradient norm, tokens/s, memory), rank 0's line of each run overlaid in the
// run's colour, and a chart of any other metric; the run page's controls (x by step, tokens
// or time since each run started, log scales, smoothing); then the config keys where the
// runs differ and their summary figures, in columns that line up under each other. Runs of
// several stores compare alike, each named by its address (b:base) where names repeat.
import { getJson, el, format, address } from "/api.js";
import { lineChart, setLines, smooth, palette } from "/charts.js";
import { xAxisSelect, smoothingControl, logToggle } from "/chart_controls.js";
import { fieldsIn, namesIn } from "/metric_fields.js";

// The grid's charts from the metric list, the validation loss beside the training loss.
const gridCharts = fieldsIn("compare_grid").flatMap((f) => {
  const chart = { key: f.name, title: f.title };
  return f.name === "loss" ? [chart, { key: "valid", title: "Validation loss" }] : [chart];
});
const gridKeys = namesIn("compare_grid");
const otherMetrics = namesIn("compare_choice");
const xAxes = [["step", "step"], ["tokens", "tokens"], ["elapsed", "time since start"]];

export function renderCompare(view, params, settings = { x: "step", smoothing: 0, logY: { loss: true, valid: true }, other: "tflops" }) {
  const names = (params.get("runs") || "").split(",").filter(Boolean);
  view.append(el("h1", {}, "Compare"));
  if (names.length < 2) {
    view.append(el("p", { class: "muted" }, "Pick two or more runs in the runs table, or open #/compare?runs=a,b."));
    return;
  }
  const runs = [];  // per run: {name, start, tokensAt, tokensPerStep, series: key -> {steps, times, ys}}
  let charts = [];
  const chartBox = el("div", { class: "charts", id: "compare-charts" });
  const metric = el("select", { id: "compare-metric" }, ...otherMetrics.map((m) => el("option", { value: m }, m)));
  metric.value = settings.other;
  const diff = el("table", { id: "config-diff", class: "aligned" });
  const summary = el("table", { id: "summary", class: "aligned" });
  view.append(el("div", { class: "controls", id: "chart-controls" }, "x axis ", xAxisSelect(settings, xAxes, build),
    smoothingControl(settings, refresh)), chartBox,
    el("h2", {}, "Config differences"), diff, el("h2", {}, "Summary"), summary);

  // A run's stored line on the chosen x axis, smoothed.
  function shown(run, line) {
    const xs = settings.x === "elapsed" ? line.times.map((t) => t - run.start)
      : settings.x === "tokens" ? line.steps.map((s) => run.tokensAt.get(s) ?? s * run.tokensPerStep) : line.steps;
    return { xs, ys: smooth(line.ys, settings.smoothing) };
  }

  function linesOf(key) {
    return runs.map((run, i) => ({ label: run.name, stroke: palette[i % palette.length], ...shown(run, run.series[key] || { steps: [], times: [], ys: [] }) }));
  }

  function build() {
    chartBox.replaceChildren();
    const chart = (name, title, key, id, extra) => ({ key, chart: lineChart(chartBox, title, linesOf(key), { id,
      xAxis: settings.x, logY: !!settings.logY[name], height: 240, controls: el("span", {}, ...(extra ? [extra, " "] : []), logToggle(settings, name, build)) }) });
    charts = gridCharts.map((c) => chart(c.key, c.title, c.key, "compare-" + c.key));
    charts.push(chart("other", "Any metric", settings.other, "compare-chart", metric));
  }

  function refresh() {
    for (const { key, chart } of charts) setLines(chart, linesOf(key));
  }

  // Rank 0's series of one key from a metrics answer.
  function rankZero(answer, key) {
    const s = (answer.series[key] || [])[0];
    return s ? { steps: s.step, times: s.time, ys: s.value } : { steps: [], times: [], ys: [] };
  }

  async function loadOther() {
    settings.other = metric.value;
    const answers = await Promise.all(runs.map((run) => getJson(`/api/runs/${run.id}/metrics?keys=${settings.other}&ranks=0&points=2000`)));
    answers.forEach((answer, i) => { runs[i].series[settings.other] = rankZero(answer, settings.other); });
  }

  async function load() {
    const c = await getJson(`/api/compare?runs=${names.map(encodeURIComponent).join(",")}`);
    drawTables(c);
    const loaded = await Promise.all(c.runs.map(async ({ id }) => {
      const [record, m, valid] = await Promise.all([getJson(`/api/runs/${id}?events=0`),
        getJson(`/api/runs/${id}/metrics?keys=${gridKeys.join(",")},tokens&ranks=0&points=2000`),
        getJson(`/api/runs/${id}/valid`)]);
      const run = { id, name: address(record), start: record.started_at ?? record.created_at, tokensAt: new Map(), tokensPerStep: 1, series: {} };
      const tokens = m.series.tokens[0];
      if (tokens) tokens.step.forEach((step, i) => run.tokensAt.set(step, tokens.value[i]));
      if (tokens?.step.length) run.tokensPerStep = tokens.value.at(-1) / Math.max(1, tokens.step.at(-1));
      for (const key of gridKeys) run.series[key] = rankZero(m, key);
      const rows = valid.filter((v) => v.loss != null);
      run.series.valid = { steps: rows.map((v) => v.step), times: rows.map((v) => v.time), ys: rows.map((v) => v.loss) };
      return run;
    }));
    runs.push(...loaded);
    await loadOther();
    build();
  }

  // Both tables: the key column, then one column per run of the same width, headed by the
  // run's name in its chart colour.
  function frame(table, names, rows) {
    const head = el("tr", {}, el("th", {}, ""), ...names.map((n, i) =>
      el("th", { class: "num", "data-run": n }, el("span", { class: "swatch", style: `background:${palette[i % palette.length]}` }), n)));
    table.replaceChildren(el("colgroup", {}, el("col", { class: "key" }), ...names.map(() => el("col"))),
      el("thead", {}, head), el("tbody", {}, ...rows));
  }

  function drawTables(c) {
    const runNames = c.runs.map(address);
    frame(diff, runNames, c.config_diff.length
      ? c.config_diff.map((d) => el("tr", {}, el("td", {}, d.key), ...d.values.map((v) => el("td", { class: "num" }, v == null ? "—" : JSON.stringify(v)))))
      : [el("tr", {}, el("td", { colspan: runNames.length + 1 }, "identical configs"))]);
    const figures = [
      ["status", (s) => s.status], ["steps logged", (s) => s.logged_steps], ["final loss", (s) => format.loss(s.final_loss)],
      ["best loss", (s) => format.loss(s.best_loss)], ["best valid loss", (s) => format.loss(s.best_valid_loss)],
      ["mean tokens/s", (s) => format.rate(s.mean_tokens_per_s)], ["mean MFU", (s) => format.percent(s.mean_mfu)],
      ["elapsed", (s) => format.duration(s.elapsed_s)],
    ];
    frame(summary, runNames, figures.map(([label, f]) =>
      el("tr", { "data-figure": label }, el("td", {}, label), ...c.summary.map((s) => el("td", { class: "num" }, String(f(s)))))));
  }

  const fail = (e) => view.append(el("p", { class: "error" }, e.message));
  metric.addEventListener("change", () => loadOther().then(build).catch(fail));
  load().catch(fail);
}
