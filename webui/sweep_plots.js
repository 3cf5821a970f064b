// The sweep page's two plots, drawn in SVG (uPlot draws neither): parallel coordinates, an
// axis per swept parameter and one for the loss with a polyline per point coloured by its
// loss, and a scatter of the loss against one parameter. A parameter whose values span more
// than 20x is drawn on a log axis; one with text values, or with values so close that their
// labels would overlap, gets its values evenly spaced in order. A point still training (its
// loss an interim one) is drawn apart, dashed and hollow, and the loss axis and the colours
// span the finished points' losses only.
const svgNs = "http://www.w3.org/2000/svg";
const logSpan = 20;
// Low loss blue, high loss orange: readable on light and dark pages alike.
const good = [37, 99, 235], bad = [234, 88, 12];
// The plots' 11-px labels: a line's height, and a character's width (a bold one's, to be safe).
const labelHeight = 14, charWidth = 7;
// The run statuses whose loss is still moving.
const trainingStatuses = new Set(["created", "running", "paused"]);

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
  const t = hi > lo ? Math.min(1, Math.max(0, (loss - lo) / (hi - lo))) : 0;
  return `rgb(${good.map((g, k) => Math.round(g + (bad[k] - g) * t)).join(",")})`;
}

// Whether a point's loss is an interim one: its run is still training.
export function training(point) {
  return trainingStatuses.has(point.status);
}

// An axis over the values: position(v) in 0..1 (0 at the bottom or left), its ticks, and
// whether it is logarithmic or evenly spaced. Few distinct values (a grid's) are each a tick;
// many, or a loss's (spread), get 5 ticks spread over the range. `room` is the axis' length
// over a label's extent along it: grid values whose labels would overlap there are spaced
// evenly in order instead, so every one stays readable.
export function axisOf(values, { spread = false, room = Infinity } = {}) {
  const present = values.filter((v) => v != null);
  const evenly = (distinct, key) => {
    const at = (v) => (distinct.length < 2 ? 0.5 : distinct.indexOf(key(v)) / (distinct.length - 1));
    return { position: at, ticks: distinct, tickAt: at, log: false, even: true };
  };
  if (present.some((v) => typeof v !== "number")) return evenly([...new Set(present.map(valueText))].sort(), valueText);
  const lo = Math.min(...present), hi = Math.max(...present);
  const log = lo > 0 && hi / lo > logSpan;
  const f = log ? Math.log10 : (x) => x;
  const position = (v) => (hi > lo ? (f(v) - f(lo)) / (f(hi) - f(lo)) : 0.5);
  const distinct = [...new Set(present)].sort((a, b) => a - b);
  if (distinct.length <= 8 && !spread) {
    const crowded = distinct.some((v, i) => i > 0 && (position(v) - position(distinct[i - 1])) * room < 1);
    return crowded ? evenly(distinct, (v) => v) : { position, ticks: distinct, tickAt: position, log, even: false };
  }
  const ticks = hi > lo ? [0, 0.25, 0.5, 0.75, 1].map((t) => (log ? 10 ** (f(lo) + t * (f(hi) - f(lo))) : lo + t * (hi - lo))) : [lo];
  return { position, ticks, tickAt: position, log, even: false };
}

// An axis' name with how its values are placed.
function axisName(key, axis) {
  return key + (axis.log ? " (log)" : axis.even && axis.ticks.some((t) => typeof t === "number") ? " (in order)" : "");
}

// The loss axis and colours: over the finished points' losses (every point's while none has
// finished). A training point beyond them sits at the axis' end.
function lossScale(shown) {
  const finished = shown.filter((p) => !training(p));
  const judged = (finished.length ? finished : shown).map((p) => p.loss);
  const axis = axisOf(judged, { spread: true });
  const [lo, hi] = [Math.min(...judged), Math.max(...judged)];
  return { axis, lo, hi, at: (loss) => Math.min(1, Math.max(0, axis.position(loss))) };
}

// A point's loss as the plots' tooltips and the page's hover line give it: "final loss 2.1",
// or for a point still training "interim final loss 4.5 at step 12 (running)".
export function lossText(p, metric, format = valueText) {
  return training(p) ? `interim ${metric} ${format(p.loss)} at step ${p.last_step ?? "—"} (${p.status})` : `${metric} ${format(p.loss)}`;
}

function pointLabel(p, keys, metric) {
  return `point ${p.point}: ${keys.map((k) => `${k}=${valueText(p.params[k])}`).join(", ")}, ${lossText(p, metric)}`;
}

// points: [{point, params, loss, best, status, last_step}], parameters: the swept keys,
// metric: the loss's label. onHover(point or null) names the point under the pointer.
export function parallelPlot(points, parameters, metric, onHover) {
  const width = 860, height = 320, bottom = 20, side = 70;
  const shown = points.filter((p) => p.loss != null);
  const keys = [...parameters, metric];
  const x = (i) => side + (keys.length < 2 ? 0 : (i * (width - 2 * side)) / (keys.length - 1));
  const spacing = keys.length < 2 ? width : (width - 2 * side) / (keys.length - 1);
  const loss = lossScale(shown);
  const axesBelow = (top) => keys.map((key) => (key === metric ? loss.axis
    : axisOf(shown.map((p) => p.params[key]), { room: (height - top - bottom) / labelHeight })));
  // Names wider than the space between axes go on two rows, alternating (the axes shorter
  // for it); longer still, cut, whole in their tooltip.
  let top = 28, axes = axesBelow(top);
  const staggered = Math.max(...keys.map((key, i) => axisName(key, axes[i]).length)) * charWidth > spacing - 8;
  if (staggered) {
    top += labelHeight + 4;
    axes = axesBelow(top);
  }
  const y = (t) => top + (1 - t) * (height - top - bottom);
  const yOf = (p, i) => (keys[i] === metric ? loss.at(p.loss) : axes[i].position(p.params[keys[i]]));
  const plot = svg("svg", { id: "sweep-parallel", class: "sweep-plot", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `parallel coordinates of ${shown.length} points` });
  const lines = svg("g", { class: "lines" });
  // Training points first, then the finished, the best last, so it is drawn over the others.
  const order = (p) => (training(p) ? 0 : p.best ? 2 : 1);
  for (const p of [...shown].sort((a, b) => order(a) - order(b))) {
    const coords = keys.map((key, i) => `${x(i).toFixed(1)},${y(yOf(p, i)).toFixed(1)}`).join(" ");
    const apart = training(p);
    lines.append(svg("polyline", { points: coords, stroke: apart ? null : lossColour(p.loss, loss.lo, loss.hi), "data-point": p.point,
      class: apart ? "training" : p.best ? "best" : null }, svg("title", {}, pointLabel(p, parameters, metric))));
    // Where a training point's line meets the loss axis: a hollow dot.
    if (apart)
      lines.append(svg("circle", { class: "training", cx: x(keys.length - 1), cy: y(loss.at(p.loss)).toFixed(1), r: 4, "data-point": p.point },
        svg("title", {}, pointLabel(p, parameters, metric))));
  }
  lines.addEventListener("mouseover", (e) => onHover(e.target.closest("[data-point]")?.dataset.point ?? null));
  lines.addEventListener("mouseleave", () => onHover(null));
  plot.append(lines);
  const nameRoom = Math.floor((staggered ? 2 * spacing - 8 : spacing - 8) / charWidth);
  keys.forEach((key, i) => {
    const name = axisName(key, axes[i]);
    const cut = name.length > nameRoom ? name.slice(0, Math.max(1, nameRoom - 1)) + "…" : name;
    const axis = svg("g", { class: "axis", "data-key": key },
      svg("line", { x1: x(i), x2: x(i), y1: y(0), y2: y(1) }),
      svg("text", { x: x(i), y: staggered && i % 2 ? 14 + labelHeight + 2 : 14, "text-anchor": "middle", class: "axis-name" }, cut,
        cut === name ? null : svg("title", {}, name)));
    for (const t of axes[i].ticks)
      axis.append(svg("text", { x: x(i) - 5, y: y(axes[i].tickAt(t)) + 4, "text-anchor": "end" }, valueText(t)));
    plot.append(axis);
  });
  return plot;
}

// The loss of each point against one parameter's values (numbers only); a training point's
// dot hollow.
export function scatterPlot(points, key, metric) {
  const width = 560, height = 300, left = 64, right = 16, top = 12, bottom = 40;
  const shown = points.filter((p) => p.loss != null && typeof p.params[key] === "number");
  // Dots kept off the frame by a margin of 4% either way.
  const inset = (t) => 0.04 + 0.92 * t;
  const longest = Math.max(...shown.map((p) => valueText(p.params[key]).length));
  const xAxis = axisOf(shown.map((p) => p.params[key]), { room: (0.92 * (width - left - right)) / ((longest + 1) * charWidth) });
  const loss = lossScale(shown);
  const x = (v) => left + inset(xAxis.position(v)) * (width - left - right);
  const y = (t) => top + (1 - inset(t)) * (height - top - bottom);
  const plot = svg("svg", { id: "sweep-scatter", class: "sweep-plot", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${metric} against ${key}` });
  const frame = svg("g", { class: "axis" }, svg("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }),
    svg("line", { x1: left, x2: left, y1: top, y2: height - bottom }),
    svg("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle", class: "axis-name" }, axisName(key, xAxis)));
  for (const t of xAxis.ticks) frame.append(svg("text", { x: left + inset(xAxis.tickAt(t)) * (width - left - right), y: height - bottom + 16, "text-anchor": "middle" }, valueText(t)));
  for (const t of loss.axis.ticks) frame.append(svg("text", { x: left - 6, y: y(loss.axis.tickAt(t)) + 4, "text-anchor": "end" }, valueText(t)));
  plot.append(frame);
  const dots = svg("g", { class: "dots" });
  for (const p of shown) {
    const apart = training(p);
    dots.append(svg("circle", { cx: x(p.params[key]).toFixed(1), cy: y(loss.at(p.loss)).toFixed(1), r: p.best ? 7 : 5, "data-point": p.point,
      fill: apart ? null : lossColour(p.loss, loss.lo, loss.hi), class: apart ? "training" : p.best ? "best" : null },
    svg("title", {}, pointLabel(p, [key], metric))));
  }
  plot.append(dots);
  return plot;
}
