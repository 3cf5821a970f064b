// Charts drawn by uPlot: one line per rank (or per run when comparing), or a min-max band
// around a mean; colours from the page's scheme; events marked as vertical lines.
export const palette = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#db2777", "#0891b2", "#ca8a04", "#4b5563"];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// Tick labels short enough for the axis and as precise as its spacing, so no two read the
// same: 1.5G, 18.52M, 3k, 0.2, 3e-4, 2.2e-4. One scale for all of an axis's ticks.
function tickLabels(ticks, incr) {
  const largest = Math.max(...ticks.map(Math.abs));
  const decimals = (unit) => Math.max(0, -Math.floor(Math.log10(incr / unit) + 1e-9));
  if (largest > 0 && largest < 0.01) {
    const digits = Math.max(0, Math.floor(Math.log10(largest) + 1e-9) - Math.floor(Math.log10(incr) + 1e-9));
    return ticks.map((t) => (t === 0 ? "0" : t.toExponential(digits)));
  }
  const [unit, suffix] = largest >= 1e9 ? [1e9, "G"] : largest >= 1e6 ? [1e6, "M"] : largest >= 1e4 ? [1e3, "k"] : [1, ""];
  return ticks.map((t) => (t === 0 ? "0" : (t / unit).toFixed(decimals(unit)) + suffix));
}

// Tick spacings of 1, 2 and 5 times a power of ten (uPlot's own also take 2.5), so
// gridlines fall on round values. Built as uPlot builds its own, so it knows their decimals.
const roundIncrs = [];
for (let exp = -32; exp < 32; exp++) for (const m of [1, 2, 5]) roundIncrs.push(+`${m}e${exp}`);
const wholeIncrs = roundIncrs.filter((incr) => incr >= 1);

// Durations since a start, as time axes label them: 45s, 2m, 1m30s, 3h, 1h15m.
function elapsedTick(seconds) {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return s % 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s / 60}m`;
  const m = Math.round(s / 60);
  return m % 60 ? `${Math.floor(m / 60)}h${m % 60}m` : `${m / 60}h`;
}
// Spacings for durations: round seconds, minutes and hours.
const elapsedIncrs = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
  172800, 432000, 864000];

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

const eventColours = { checkpoint: "--ok", command: "--accent", nan: "--bad", error: "--bad", dropped: "--warn", alert: "--bad",
  rewind: "--warn", restart: "--warn" };

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

// The x axes: "step", "tokens", "time" (Unix seconds as clock times) and "elapsed" (seconds
// since a start, as durations).
const xAxisLabels = { step: "step", tokens: "tokens", time: "wall time", elapsed: "time since start" };

// lines: [{label, xs: [...], ys: [...], width?, stroke?, dash?, notes?}], merged onto one sorted
// x axis; notes, a text per point, follow the value in the legend. bands: [[upper, lower]]
// pairs of line indices to fill between, in the upper's colour. events: a function giving
// [{x, kind, text}] to mark. The chart is on its box as `.chart`.
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
  const xTicks = {
    step: { incrs: wholeIncrs },
    tokens: { incrs: wholeIncrs, values: (u, ticks, axis, space, incr) => tickLabels(ticks, incr) },
    elapsed: { incrs: elapsedIncrs, values: (u, ticks) => ticks.map(elapsedTick) },
  }[xAxis];
  const options = {
    width: Math.max(300, box.clientWidth - 16),
    height,
    // A single x value (one reading so far) gets a unit either side, where uPlot would pad
    // it by its magnitude (from 0 to twice a Unix time).
    scales: { x: { time: xAxis === "time", range: (u, min, max) => (u.data[0].length === 1 ? [u.data[0][0] - 1, u.data[0][0] + 1] : [min, max]) },
      y: logY ? { distr: 3 } : { range: linearRange } },
    // A log axis keeps uPlot's own labels, which leave the minor ticks unlabelled.
    axes: [{ ...axis, label: xAxisLabels[xAxis], ...xTicks },
      logY ? { ...axis, size: 60 } : { ...axis, size: 60, incrs: roundIncrs, values: (u, ticks, axis, space, incr) => tickLabels(ticks, incr) }],
    series: [{ label: xAxisLabels[xAxis] }, ...lines.map((l, i) => ({
      label: l.label, stroke: stroke(l, i), width: l.width || 1.5, dash: l.dash, spanGaps: true,
      ...(l.notes ? { value: notedValue } : {}),
    }))],
    bands: bands.map(([upper, lower]) => ({ series: [upper + 1, lower + 1], fill: stroke(lines[upper], upper) + "33" })),
    cursor: { drag: { x: true, y: false } },
    plugins: events ? [eventsPlugin(events)] : [],
  };
  const data = toData(lines, logY);
  box.dataset.points = data[0].length;
  box.chart = new uPlot(options, data, box);
  lines.forEach((l, i) => { box.chart.series[i + 1].notes = notesOf(l); });
  return box.chart;
}

// A line's notes (a text per point, as a spread's slowest rank) by x, for the legend.
function notesOf(line) {
  return line.notes ? new Map(line.xs.map((x, i) => [x, line.notes[i]])) : null;
}

// The legend's value of a line with notes: the value and the note at the cursor's x.
function notedValue(u, value, seriesIndex, index) {
  if (value == null) return "--";
  const note = u.series[seriesIndex].notes?.get(u.data[0][index]);
  return `${+value.toPrecision(5)}${note ? ` (${note})` : ""}`;
}

// New values for the same lines (a live run's rows as they arrive, a new smoothing), and
// their labels and widths where those changed (another rank became the slowest), in place.
// A chart zoomed in stays zoomed; one showing everything grows with the data.
export function setLines(chart, lines) {
  const legendRows = chart.root.querySelectorAll(".u-legend tr.u-series");
  const firstRow = legendRows.length - lines.length;  // the x series has a row in a live legend
  lines.forEach((line, i) => {
    const series = chart.series[i + 1];
    series.width = line.width || 1.5;
    series.notes = notesOf(line);
    if (series.label === line.label) return;
    series.label = line.label;
    const cell = legendRows[firstRow + i]?.querySelector(".u-label");
    if (cell) cell.textContent = line.label;
  });
  const data = toData(lines, chart.scales.y.distr === 3);
  const x = chart.scales.x, shown = chart.data[0];
  const zoomed = shown.length > 0 && (x.min > shown[0] || x.max < shown[shown.length - 1]);
  chart.root.parentElement.dataset.points = data[0].length;  // how many points it shows
  chart.setData(data, !zoomed);
}
