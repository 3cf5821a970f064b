// The run page's Experts panel, for a run with mixture-of-experts layers (docs/moe.md): a
// heatmap of one layer's routing (x the step, y the expert, colour the expert's share of the
// layer's tokens), each layer's latest figures, and the imbalance (max/mean) and aux loss of
// every layer over the steps. It stays hidden until the run has expert loads.
import { el } from "/api.js";
import { lineChart, setLines } from "/charts.js";

const maxColumns = 2000;  // steps kept per layer: past it every second older one goes
// Viridis at five stops: ordered in lightness, readable on light and dark pages alike.
const ramp = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const margin = { left: 44, bottom: 22, top: 4, right: 8 };

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// A share as a colour: the scale saturates at three times the fair share, so a starved
// expert (dark) and a hot one (yellow) both stand out whatever the expert count.
function colour(share, experts) {
  const t = Math.min(1, share / Math.min(1, 3 / experts)) * (ramp.length - 1);
  const i = Math.min(ramp.length - 2, Math.floor(t)), f = t - i;
  const [a, b] = [ramp[i], ramp[i + 1]];
  return `rgb(${a.map((v, k) => Math.round(v + (b[k] - v) * f)).join(",")})`;
}

// About `count` round step values (1, 2 or 5 x 10^n apart) between lo and hi.
function roundTicks(lo, hi, count) {
  if (hi <= lo) return [lo];
  const raw = (hi - lo) / count, power = 10 ** Math.floor(Math.log10(raw));
  const incr = Math.max(1, [1, 2, 5, 10].map((m) => m * power).find((v) => v >= raw));  // steps are whole
  const ticks = [];
  for (let t = Math.ceil(lo / incr) * incr; t <= hi; t += incr) ticks.push(t);
  return ticks;
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
const fixed = (x, digits) => (x == null ? "—" : x.toFixed(digits));

export function expertsSection() {
  const layers = new Map();  // layer -> {experts, steps, tokens, dropped, aux, entropy, imbalance}
  let current = null;  // the layer the heatmap shows
  let charts = [];
  let pending = false;

  const select = el("select", { id: "experts-layer", onchange: () => { current = Number(select.value); draw(); } });
  const heading = el("h3", {});
  const canvas = el("canvas", { id: "experts-heatmap", height: "240" });
  const readout = el("div", { id: "experts-readout", class: "muted" }, "point at a cell for its counts");
  const legend = el("div", { class: "heatmap-legend muted", id: "experts-legend" });
  const latestTable = el("table", { id: "experts-latest" });
  const chartBox = el("div", { class: "charts", id: "experts-charts" });
  const element = el("section", { id: "experts", hidden: "" },
    el("h2", {}, "Experts"),
    el("div", { class: "controls" }, "layer ", select),
    el("div", { class: "chart heatmap" }, heading, canvas, legend, readout),
    el("div", { class: "table-wrap" }, latestTable), chartBox);

  function layerOf(layer, experts) {
    if (!layers.has(layer))
      layers.set(layer, { experts, steps: [], tokens: [], dropped: [], aux: [], entropy: [], imbalance: [] });
    return layers.get(layer);
  }

  function append(l, step, tokens, dropped, aux, entropy, imbalance) {
    if (l.steps.length && step <= l.steps[l.steps.length - 1]) return;  // already shown
    l.experts = tokens.length;
    l.steps.push(step);
    l.tokens.push(tokens);
    l.dropped.push(dropped);
    l.aux.push(aux);
    l.entropy.push(entropy);
    l.imbalance.push(imbalance);
    if (l.steps.length > maxColumns)
      for (const key of ["steps", "tokens", "dropped", "aux", "entropy", "imbalance"])
        l[key] = l[key].filter((_, i) => i % 2 === 0 || i === l[key].length - 1);
  }

  function drawHeatmap() {
    const l = layers.get(current);
    const ratio = devicePixelRatio || 1;
    const width = canvas.clientWidth || 800, height = Math.min(360, Math.max(160, l.experts * 14 + margin.top + margin.bottom));
    canvas.style.height = `${height}px`;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.clearRect(0, 0, width, height);
    const plotW = width - margin.left - margin.right, plotH = height - margin.top - margin.bottom;
    const n = l.steps.length, lo = l.steps[0], hi = l.steps[n - 1];
    // Each column from its step to the next one's; n columns share the width by step.
    const span = n > 1 ? (hi - lo) * n / (n - 1) : 1;
    const xOf = (step) => margin.left + ((step - lo) / span) * plotW;
    const rowH = plotH / l.experts;
    for (let i = 0; i < n; i++) {
      const x0 = xOf(l.steps[i]), x1 = i + 1 < n ? xOf(l.steps[i + 1]) : margin.left + plotW;
      const total = sum(l.tokens[i]);
      for (let e = 0; e < l.experts; e++) {
        ctx.fillStyle = colour(total > 0 ? l.tokens[i][e] / total : 0, l.experts);
        // Expert 0 at the top; a hair of overlap so no seam shows between cells.
        ctx.fillRect(x0, margin.top + e * rowH, Math.max(1, x1 - x0 + 0.5), rowH + 0.5);
      }
    }
    ctx.fillStyle = cssVar("--muted");
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const every = Math.max(1, Math.ceil(12 / rowH));
    for (let e = 0; e < l.experts; e += every) ctx.fillText(String(e), margin.left - 6, margin.top + (e + 0.5) * rowH);
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const t of roundTicks(lo, hi, Math.max(2, Math.floor(plotW / 110)))) ctx.fillText(String(t), xOf(t), margin.top + plotH + 5);
    canvas.dataset.layer = current;
    canvas.dataset.steps = n;
    canvas.dataset.experts = l.experts;
    canvas.pick = (px, py) => {
      if (px < margin.left || py < margin.top || py >= margin.top + plotH) return null;
      let i = n - 1;
      while (i > 0 && xOf(l.steps[i]) > px) i--;
      return { i, e: Math.min(l.experts - 1, Math.floor((py - margin.top) / rowH)) };
    };
  }

  function describe(l, i, e) {
    const tokens = l.tokens[i][e], total = sum(l.tokens[i]), dropped = l.dropped[i].length ? l.dropped[i][e] : 0;
    const share = total > 0 ? ((100 * tokens) / total).toFixed(1) : "0.0";
    return `step ${l.steps[i]} · expert ${e}: ${tokens} tokens, ${share}% of the layer's` + (dropped ? `, ${dropped} dropped` : "");
  }

  canvas.addEventListener("mousemove", (event) => {
    const l = layers.get(current), rect = canvas.getBoundingClientRect();
    const cell = l && canvas.pick?.(event.clientX - rect.left, event.clientY - rect.top);
    readout.textContent = cell ? describe(l, cell.i, cell.e) : "point at a cell for its counts";
  });

  function drawLatest() {
    const head = el("tr", {}, ...["layer", "experts", "step", "imbalance", "aux loss", "router entropy", "dropped"].map((h, i) =>
      el("th", { class: i ? "num" : "" }, h)));
    const rows = [...layers.keys()].sort((a, b) => a - b).map((layer) => {
      const l = layers.get(layer), i = l.steps.length - 1;
      const routed = sum(l.tokens[i]), dropped = sum(l.dropped[i]);
      return el("tr", { "data-layer": layer }, el("td", {}, String(layer)),
        ...[String(l.experts), String(l.steps[i]), fixed(l.imbalance[i], 2), fixed(l.aux[i], 4), fixed(l.entropy[i], 3),
          routed > 0 ? `${((100 * dropped) / routed).toFixed(1)}%` : "—"].map((text) => el("td", { class: "num" }, text)));
    });
    latestTable.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  }

  function chartLines(key) {
    return [...layers.keys()].sort((a, b) => a - b).map((layer) => {
      const l = layers.get(layer);
      return { label: `layer ${layer}`, xs: l.steps, ys: l[key] };
    });
  }

  function drawCharts() {
    const specs = [["imbalance", "Imbalance (max / mean tokens per expert)"], ["aux", "Load-balancing aux loss"]];
    if (charts.length && charts.every((c) => c.series.length === layers.size + 1)) {
      specs.forEach(([key], i) => setLines(charts[i], chartLines(key)));
      return;
    }
    chartBox.replaceChildren();
    charts = specs.map(([key, title]) => lineChart(chartBox, title, chartLines(key), { id: `chart-experts-${key}`, height: 200 }));
  }

  function draw() {
    if (!layers.size) return;
    element.hidden = false;
    const ids = [...layers.keys()].sort((a, b) => a - b);
    if (select.options.length !== ids.length)
      select.replaceChildren(...ids.map((layer) => el("option", { value: layer }, `layer ${layer}`)));
    if (current == null || !layers.has(current)) current = ids[0];
    select.value = String(current);
    const l = layers.get(current);
    heading.textContent = `Layer ${current}: each expert's share of the layer's tokens, by step (${l.experts} experts)`;
    legend.replaceChildren("share: ", ...[0, 1, 2, 3].map((k) => {
      const share = Math.min(1, k / l.experts);
      return el("span", { class: "legend-swatch", style: `background:${colour(share, l.experts)}` },
        k === 0 ? "0" : k === 1 ? "fair share" : `${k}x`);
    }));
    drawHeatmap();
    drawLatest();
    drawCharts();
  }

  // Live rows arrive with every logged step; the panel redraws at most every 250 ms.
  function redraw() {
    if (pending) return;
    pending = true;
    setTimeout(() => {
      pending = false;
      draw();
    }, 250);
  }

  return {
    element,
    // GET /api/runs/{run}/experts's answer up to hello's last_expert_step: the history goes
    // before the live rows that arrived while it loaded.
    load(body) {
      const live = new Map(layers);
      layers.clear();
      for (const s of body.series) {
        const l = layerOf(s.layer, s.experts);
        s.step.forEach((step, i) => append(l, step, s.tokens[i], s.dropped[i], s.aux_loss[i], s.router_entropy[i], s.imbalance[i]));
      }
      for (const [layer, newer] of live) {
        const l = layerOf(layer, newer.experts);
        newer.steps.forEach((step, i) => append(l, step, newer.tokens[i], newer.dropped[i], newer.aux[i], newer.entropy[i], newer.imbalance[i]));
      }
      draw();
    },
    // The live stream's rows, oldest first.
    add(rows) {
      for (const r of rows) append(layerOf(r.layer, r.tokens.length), r.step, r.tokens, r.dropped, r.aux_loss, r.router_entropy, r.imbalance);
      redraw();
    },
  };
}
