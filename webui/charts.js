// Charts drawn by uPlot: one line per rank (or per run when comparing), or a min-max band
// around a mean; colours from the page's scheme; events marked as vertical lines.
export const palette = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#db2777", "#0891b2", "#ca8a04", "#4b5563"];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// Tick labels short enough for the axis: 1.5G, 20M, 3.2k, 0.25, 3e-4.
function tick(value) {
  const a = Math.abs(value);
  if (a === 0) return "0";
  if (a >= 1e9) return +(value / 1e9).toPrecision(3) + "G";
  if (a >= 1e6) return +(value / 1e6).toPrecision(3) + "M";
  if (a >= 1e4) return +(value / 1e3).toPrecision(3) + "k";
  if (a < 0.01) return value.toExponential(1).replace("e-", "e-").replace(".0e", "e");
  return String(+value.toPrecision(3));
}

// A nearly constant series (a learning rate held flat) still gets a visible band around it.
function linearRange(u, min, max) {
  if (min == null || max == null) return [0, 1];
  const span = max - min;
  const pad = span > Math.abs(max) * 1e-3 ? span * 0.08 : Math.abs(max) * 0.05 || 1;
  return [min - pad, max + pad];
}

// TensorBoard's smoothing: an exponential moving average with weight 0..0.99, debiased so
// the first points are not pulled towards zero. Gaps stay gaps; the input is left as it is.
export function smooth(ys, weight) {
  if (!weight) return ys;
  let average = 0, count = 0;
  return ys.map((y) => {
    if (y == null || !Number.isFinite(y)) return y;
    average = average * weight + (1 - weight) * y;
    count++;
    return average / (1 - weight ** count);
  });
}

function toData(lines, logY) {
  const xs = [...new Set(lines.flatMap((l) => l.xs))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  for (const line of lines) {
    const ys = new Array(xs.length).fill(null);
    // A log scale has no place for zero or less (a learning rate warming up from 0).
    line.xs.forEach((x, i) => { ys[index.get(x)] = logY && !(line.ys[i] > 0) ? null : line.ys[i]; });
    data.push(ys);
  }
  return data;
}

const eventColours = { checkpoint: "--ok", command: "--accent", nan: "--bad", error: "--bad", dropped: "--warn" };

// A uPlot plugin: a dashed vertical line per event at its x (drawn on the canvas in the
// draw hook) and a small flag at its top whose tooltip says what happened. marks() is asked
// at each draw, so events that arrive later show at the next one.
function eventsPlugin(marks) {
  return {
    hooks: {
      draw: (u) => {
        const { left, top, width, height } = u.bbox;
        for (const flag of u.over.querySelectorAll(".event-mark")) flag.remove();
        u.ctx.save();
        u.ctx.lineWidth = devicePixelRatio;
        u.ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
        for (const mark of marks()) {
          if (mark.x == null) continue;
          const x = u.valToPos(mark.x, "x", true);
          if (x < left - 1 || x > left + width + 1) continue;  // a pixel's slack for the last step
          const colour = cssVar(eventColours[mark.kind] || "--muted");
          u.ctx.strokeStyle = colour;
          u.ctx.beginPath();
          u.ctx.moveTo(x, top);
          u.ctx.lineTo(x, top + height);
          u.ctx.stroke();
          const flag = document.createElement("div");
          flag.className = "event-mark";
          flag.dataset.kind = mark.kind;
          flag.dataset.x = mark.x;
          flag.title = mark.text;
          flag.style.left = `${u.valToPos(mark.x, "x")}px`;
          flag.style.background = colour;
          u.over.append(flag);
        }
        u.ctx.restore();
      },
    },
  };
}

// The x axes: "step", "tokens", "time" (Unix seconds as clock times) and "seconds" (Unix
// seconds as seconds since the first).
const xAxisLabels = { step: "step", tokens: "tokens", time: "wall time", seconds: "seconds" };

// lines: [{label, xs: [...], ys: [...], width?, stroke?, dash?}], merged onto one sorted x
// axis. bands: [[upper, lower]] pairs of line indices to fill between, in the upper's colour.
// events: a function giving [{x, kind, text}] to mark. The chart is on its box as `.chart`.
export function lineChart(container, title, lines,
  { logY = false, height = 220, id, xAxis = "step", bands = [], events, controls } = {}) {
  const axis = { stroke: cssVar("--muted"), grid: { stroke: cssVar("--line"), width: 1 }, ticks: { stroke: cssVar("--line") } };
  const box = document.createElement("div");
  box.className = "chart";
  if (id) box.id = id;
  const heading = document.createElement("h3");
  heading.textContent = title;
  if (controls) heading.append(controls);
  box.append(heading);
  container.append(box);
  const stroke = (l, i) => l.stroke || palette[i % palette.length];
  const xValues = {
    seconds: { values: (u, ticks, axis, space, step) => ticks.map((t) => (t - u.data[0][0]).toFixed(step < 1 ? 1 : 0)) },
    tokens: { values: (u, ticks) => ticks.map(tick) },
  }[xAxis];
  const options = {
    width: Math.max(300, box.clientWidth - 16),
    height,
    // A single x value (one reading so far) gets a unit either side, where uPlot would pad
    // it by its magnitude (from 0 to twice a Unix time).
    scales: { x: { time: xAxis === "time", range: (u, min, max) => (u.data[0].length === 1 ? [u.data[0][0] - 1, u.data[0][0] + 1] : [min, max]) },
      y: logY ? { distr: 3 } : { range: linearRange } },
    // A log axis keeps uPlot's own labels, which leave the minor ticks unlabelled.
    axes: [{ ...axis, label: xAxisLabels[xAxis], ...xValues }, logY ? { ...axis, size: 60 } : { ...axis, size: 60, values: (u, ticks) => ticks.map(tick) }],
    series: [{ label: xAxisLabels[xAxis] }, ...lines.map((l, i) => ({
      label: l.label, stroke: stroke(l, i), width: l.width || 1.5, dash: l.dash, spanGaps: true,
    }))],
    bands: bands.map(([upper, lower]) => ({ series: [upper + 1, lower + 1], fill: stroke(lines[upper], upper) + "33" })),
    cursor: { drag: { x: true, y: false } },
    plugins: events ? [eventsPlugin(events)] : [],
  };
  const data = toData(lines, logY);
  box.dataset.points = data[0].length;
  box.chart = new uPlot(options, data, box);
  return box.chart;
}

// New values for the same lines (a live run's rows as they arrive, a new smoothing). A
// chart zoomed in stays zoomed; one showing everything grows with the data.
export function setLines(chart, lines) {
  const data = toData(lines, chart.scales.y.distr === 3);
  const x = chart.scales.x, shown = chart.data[0];
  const zoomed = shown.length > 0 && (x.min > shown[0] || x.max < shown[shown.length - 1]);
  chart.root.parentElement.dataset.points = data[0].length;  // how many points it shows
  chart.setData(data, !zoomed);
}
