// The compare page: any metric of several runs overlaid (rank 0's line of each), the keys
// where their configs differ, and the summary figures side by side.
import { getJson, el, format } from "/api.js";
import { lineChart } from "/charts.js";

const metrics = ["loss", "lr", "grad_norm", "tokens_per_s", "tflops", "mfu", "mem_used", "fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "data_ms"];

export function renderCompare(view, params) {
  const runs = (params.get("runs") || "").split(",").filter(Boolean);
  view.append(el("h1", {}, "Compare"));
  if (runs.length < 2) {
    view.append(el("p", { class: "muted" }, "Pick two or more runs in the runs table, or open #/compare?runs=a,b."));
    return;
  }
  const metric = el("select", { id: "compare-metric" }, ...metrics.map((m) => el("option", { value: m }, m)));
  const logY = el("input", { type: "checkbox", id: "compare-log" });
  const chartBox = el("div", { class: "charts", id: "compare-charts" });
  const diff = el("table", { id: "config-diff" });
  const summary = el("table", { id: "summary" });
  view.append(el("div", { class: "controls" }, "metric ", metric, el("label", {}, logY, " log scale")), chartBox,
    el("h2", {}, "Config differences"), diff, el("h2", {}, "Summary"), summary);

  async function drawChart() {
    const key = metric.value;
    const results = await Promise.all(runs.map((r) => getJson(`/api/runs/${encodeURIComponent(r)}/metrics?keys=${key}&ranks=0&points=2000`)));
    const lines = results.map((res, i) => {
      const s = res.series[key][0] || { step: [], value: [] };
      return { label: runs[i], xs: s.step, ys: s.value };
    });
    chartBox.replaceChildren();
    lineChart(chartBox, key, lines, { logY: logY.checked, height: 320, id: "compare-chart" });
  }

  async function drawTables() {
    const c = await getJson(`/api/compare?runs=${runs.map(encodeURIComponent).join(",")}`);
    const names = c.runs.map((r) => r.name);
    const head = el("tr", {}, el("th", {}, "key"), ...names.map((n) => el("th", {}, n)));
    diff.replaceChildren(el("thead", {}, head.cloneNode(true)), el("tbody", {}, ...(c.config_diff.length
      ? c.config_diff.map((d) => el("tr", {}, el("td", {}, d.key), ...d.values.map((v) => el("td", {}, v == null ? "—" : JSON.stringify(v)))))
      : [el("tr", {}, el("td", { colspan: names.length + 1 }, "identical configs"))])));
    const rows = [
      ["status", (s) => s.status], ["steps logged", (s) => s.logged_steps], ["final loss", (s) => format.loss(s.final_loss)],
      ["best loss", (s) => format.loss(s.best_loss)], ["best valid loss", (s) => format.loss(s.best_valid_loss)],
      ["mean tokens/s", (s) => format.rate(s.mean_tokens_per_s)], ["mean MFU", (s) => format.percent(s.mean_mfu)],
      ["elapsed", (s) => format.duration(s.elapsed_s)],
    ];
    summary.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows.map(([label, f]) =>
      el("tr", {}, el("td", {}, label), ...c.summary.map((s) => el("td", { class: "num" }, String(f(s))))))));
  }

  const fail = (e) => view.append(el("p", { class: "error" }, e.message));
  metric.addEventListener("change", () => drawChart().catch(fail));
  logY.addEventListener("change", () => drawChart().catch(fail));
  drawChart().catch(fail);
  drawTables().catch(fail);
}
