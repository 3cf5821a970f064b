// The sweep page's two plots, drawn in SVG (uPlot draws neither): parallel coordinates, an
// axis per swept parameter and one for the loss with a polyline per point coloured by its
// loss, and a scatter of the loss against one parameter. A parameter whose values span more
// than 20x is drawn on a log axis; one with text values gets its values evenly spaced.
const svgNs = "http://www.w3.org/2000/svg";
const logSpan = 20;
// Low loss blue, high loss orange: readable on light and dark pages alike.
const good = [37, 99, 235], bad = [234, 88, 12];

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(svgNs, tag);
  for (const [key, value] of Object.entries(attributes)) if (value != null) node.setAttribute(key, value);
  node.append(...children.filter((c) => c != null));
  return node;
}

// A value as a label: numbers short (0.001, 3e-4, 256), text as it is.
export function valueText(v) {
  if (v == null) return "—";
  if (typeof v !== "number") return typeof v === "string" ? v : JSON.stringify(v);
  if (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e6)) return v.toExponential(2).replace(/\.?0+e/, "e");
  return String(+v.toPrecision(4));
}

export function lossColour(loss, lo, hi) {
  const t = hi > lo ? (loss - lo) / (hi - lo) : 0;
  return `rgb(${good.map((g, k) => Math.round(g + (bad[k] - g) * t)).join(",")})`;
}

// An axis over the values: position(v) in 0..1 (0 at the bottom or left), its ticks, and
// whether it is logarithmic. Few distinct values (a grid's) are each a tick; many, or a
// loss's (spread), get 5 ticks spread over the range.
export function axisOf(values, { spread = false } = {}) {
  const present = values.filter((v) => v != null);
  if (present.some((v) => typeof v !== "number")) {
    const distinct = [...new Set(present.map(valueText))].sort();
    const at = (v) => (distinct.length < 2 ? 0.5 : distinct.indexOf(valueText(v)) / (distinct.length - 1));
    return { position: at, ticks: distinct, tickAt: (t) => at(t), log: false, text: true };
  }
  const lo = Math.min(...present), hi = Math.max(...present);
  const log = lo > 0 && hi / lo > logSpan;
  const f = log ? Math.log10 : (x) => x;
  const position = (v) => (hi > lo ? (f(v) - f(lo)) / (f(hi) - f(lo)) : 0.5);
  const distinct = [...new Set(present)].sort((a, b) => a - b);
  const ticks = distinct.length <= 8 && !spread ? distinct : [0, 0.25, 0.5, 0.75, 1].map((t) => (log ? 10 ** (f(lo) + t * (f(hi) - f(lo))) : lo + t * (hi - lo)));
  return { position, ticks, tickAt: position, log, text: false };
}

// points: [{point, params, loss, best}], parameters: the swept keys, metric: the loss's label.
// onHover(point or null) names the point under the pointer.
export function parallelPlot(points, parameters, metric, onHover) {
  const width = 860, height = 320, top = 28, bottom = 20, side = 70;
  const shown = points.filter((p) => p.loss != null);
  const keys = [...parameters, metric];
  const valueOf = (p, key) => (key === metric ? p.loss : p.params[key]);
  const axes = keys.map((key) => axisOf(shown.map((p) => valueOf(p, key)), { spread: key === metric }));
  const x = (i) => side + (keys.length < 2 ? 0 : (i * (width - 2 * side)) / (keys.length - 1));
  const y = (t) => top + (1 - t) * (height - top - bottom);
  const [lo, hi] = [Math.min(...shown.map((p) => p.loss)), Math.max(...shown.map((p) => p.loss))];
  const plot = svg("svg", { id: "sweep-parallel", class: "sweep-plot", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `parallel coordinates of ${shown.length} points` });
  const lines = svg("g", { class: "lines" });
  // The best point last, so it is drawn over the others.
  for (const p of [...shown].sort((a, b) => a.best - b.best)) {
    const coords = keys.map((key, i) => `${x(i).toFixed(1)},${y(axes[i].position(valueOf(p, key))).toFixed(1)}`).join(" ");
    const label = `point ${p.point}: ${parameters.map((k) => `${k}=${valueText(p.params[k])}`).join(", ")}, ${metric} ${valueText(p.loss)}`;
    lines.append(svg("polyline", { points: coords, stroke: lossColour(p.loss, lo, hi), "data-point": p.point,
      class: p.best ? "best" : null }, svg("title", {}, label)));
  }
  lines.addEventListener("mouseover", (e) => onHover(e.target.closest("polyline")?.dataset.point ?? null));
  lines.addEventListener("mouseleave", () => onHover(null));
  plot.append(lines);
  keys.forEach((key, i) => {
    const axis = svg("g", { class: "axis", "data-key": key },
      svg("line", { x1: x(i), x2: x(i), y1: y(0), y2: y(1) }),
      svg("text", { x: x(i), y: 14, "text-anchor": "middle", class: "axis-name" }, key + (axes[i].log ? " (log)" : "")));
    for (const t of axes[i].ticks)
      axis.append(svg("text", { x: x(i) - 5, y: y(axes[i].tickAt(t)) + 4, "text-anchor": "end" }, valueText(t)));
    plot.append(axis);
  });
  return plot;
}

// The loss of each point against one parameter's values (numbers only).
export function scatterPlot(points, key, metric) {
  const width = 560, height = 300, left = 64, right = 16, top = 12, bottom = 40;
  const shown = points.filter((p) => p.loss != null && typeof p.params[key] === "number");
  const xAxis = axisOf(shown.map((p) => p.params[key]));
  const yAxis = axisOf(shown.map((p) => p.loss), { spread: true });
  // Dots kept off the frame by a margin of 4% either way.
  const inset = (t) => 0.04 + 0.92 * t;
  const x = (v) => left + inset(xAxis.position(v)) * (width - left - right);
  const y = (v) => top + (1 - inset(yAxis.position(v))) * (height - top - bottom);
  const plot = svg("svg", { id: "sweep-scatter", class: "sweep-plot", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${metric} against ${key}` });
  const frame = svg("g", { class: "axis" }, svg("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }),
    svg("line", { x1: left, x2: left, y1: top, y2: height - bottom }),
    svg("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle", class: "axis-name" }, key + (xAxis.log ? " (log)" : "")));
  for (const t of xAxis.ticks) frame.append(svg("text", { x: x(t), y: height - bottom + 16, "text-anchor": "middle" }, valueText(t)));
  for (const t of yAxis.ticks) frame.append(svg("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end" }, valueText(t)));
  plot.append(frame);
  const dots = svg("g", { class: "dots" });
  const [lo, hi] = [Math.min(...shown.map((p) => p.loss)), Math.max(...shown.map((p) => p.loss))];
  for (const p of shown)
    dots.append(svg("circle", { cx: x(p.params[key]).toFixed(1), cy: y(p.loss).toFixed(1), r: p.best ? 7 : 5, "data-point": p.point,
      fill: lossColour(p.loss, lo, hi), class: p.best ? "best" : null }, svg("title", {}, `point ${p.point}: ${key}=${valueText(p.params[key])}, ${metric} ${valueText(p.loss)}`)));
  plot.append(dots);
  return plot;
}
