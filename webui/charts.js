// Charts drawn by uPlot: one line per rank (or per run when comparing), step on the x axis,
// colours from the page's scheme, the slowest rank's line drawn thicker.
const palette = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#db2777", "#0891b2", "#ca8a04", "#4b5563"];

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

function toData(lines) {
  const xs = [...new Set(lines.flatMap((l) => l.xs))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  for (const line of lines) {
    const ys = new Array(xs.length).fill(null);
    line.xs.forEach((x, i) => { ys[index.get(x)] = line.ys[i]; });
    data.push(ys);
  }
  return data;
}

// lines: [{label, xs: [...], ys: [...], width?}], merged onto one sorted x axis.
// xLabel "seconds" draws the x values (Unix times) as seconds since the first.
export function lineChart(container, title, lines, { logY = false, height = 220, id, xLabel = "step" } = {}) {
  const axis = { stroke: cssVar("--muted"), grid: { stroke: cssVar("--line"), width: 1 }, ticks: { stroke: cssVar("--line") } };
  const box = document.createElement("div");
  box.className = "chart";
  if (id) box.id = id;
  const heading = document.createElement("h3");
  heading.textContent = title;
  box.append(heading);
  container.append(box);
  const options = {
    width: Math.max(300, box.clientWidth - 16),
    height,
    scales: { x: { time: false }, y: logY ? { distr: 3 } : { range: linearRange } },
    // A log axis keeps uPlot's own labels, which leave the minor ticks unlabelled.
    axes: [{ ...axis, label: xLabel, ...(xLabel === "seconds" ? { values: (u, ticks) => ticks.map((t) => String(Math.round(t - u.data[0][0]))) } : {}) }, logY ? { ...axis, size: 60 } : { ...axis, size: 60, values: (u, ticks) => ticks.map(tick) }],
    series: [{ label: xLabel }, ...lines.map((l, i) => ({
      label: l.label, stroke: palette[i % palette.length], width: l.width || 1.5, spanGaps: true,
    }))],
    cursor: { drag: { x: true, y: false } },
  };
  const data = toData(lines);
  box.dataset.points = data[0].length;
  return new uPlot(options, data, box);
}

// New values for the same lines (a live run's rows as they arrive).
export function setLines(chart, lines) {
  const data = toData(lines);
  chart.root.parentElement.dataset.points = data[0].length;  // how many steps it shows
  chart.setData(data);
}
