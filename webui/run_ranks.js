// The run page's Ranks panel, the straggler view (docs/dashboard.md#ranks): each rank's
// host, device, latest step time and its split (numbers and a stacked bar) and memory, the
// slowest rank highlighted; and a heat strip of every rank over the steps (a row per rank, a
// column per step), coloured by the rank's working time (forward, backward, optimizer) over
// the median rank's at that step. It stays hidden for a run of one rank. The table scrolls in
// its own box and draws only the rows in view (a 4,096-rank run's 4,096 rows laid out took
// the page half a second); a click on a column's heading sorts the ranks by it.
import { getJson, el, format } from "/api.js";
import { palette } from "/charts.js";
import { namesIn } from "/metric_fields.js";

// The parts of the step's time (the metric list's time_split), each labelled by its name less "_ms".
const splitKeys = namesIn("time_split").map((k) => [k, k.replace(/_ms$/, "")]);
const margin = { left: 64, bottom: 22, top: 4, right: 8 };
const refreshEvery = 2000;  // ms: a live run's panel asks for new figures at most this often
const overscan = 10;        // rows drawn above and below the table's box
const boxHeight = 480;      // px: the table's box at most (style.css #ranks-scroll)
// The heat strip's rows at most: 3 px each, the strip at most 480 px high. A larger world's
// consecutive ranks share a row showing their slowest (the API's `group`), which also leaves
// the answer's cells to more steps.
const stripRows = 160;
// The strip's colours: the median rank neutral, slower ones towards red (saturating at 1.5x),
// faster ones towards blue (at 0.5x); readable on light and dark pages alike.
const fast = [37, 99, 235], neutral = [148, 163, 184], slow = [220, 38, 38];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

function heatRgb(relative) {
  const t = Math.max(-1, Math.min(1, (relative - 1) / 0.5));
  const to = t >= 0 ? slow : fast, f = Math.abs(t);
  return neutral.map((v, k) => Math.round(v + (to[k] - v) * f));
}

function heatColour(relative) {
  return `rgb(${heatRgb(relative).join(",")})`;
}

const ms = (x) => (x == null ? "—" : x.toFixed(1));
const times = (x) => (x == null ? "—" : `${x.toFixed(2)}x`);

// onSlowest(rank or null) hears of each change of the rank the store names the slowest.
export function ranksSection(run, onSlowest) {
  let places = new Map();  // rank -> host, for the strip's readout
  let heat = null;
  let slowest = null;
  let last = 0, timer = null, inFlight = false;

  const table = el("table", { id: "ranks-table" });
  const box = el("div", { class: "table-wrap", id: "ranks-scroll" }, table);
  let body = null;    // the latest /ranks answer
  let order = [];     // its ranks, sorted
  let longest = 1e-9; // the longest step time, the split bars' full width
  let rowHeight = 27; // px: a drawn row's, measured once rows are drawn
  const sort = { key: "rank", descending: false };
  const columns = [["rank", "rank"], ["host", "host"], ["device", "device"], ["step", "step"], ["step ms", "step_ms"],
    ["work / median", "relative"], ...splitKeys.map(([k, label]) => [`${label} ms`, k])];
  const summary = el("p", { id: "ranks-summary", class: "muted" });
  const heading = el("h3", {}, "Each rank's working time (forward, backward, optimizer) over the median rank's, by step");
  const canvas = el("canvas", { id: "ranks-heat", height: "160" });
  const legend = el("div", { class: "heatmap-legend muted", id: "ranks-legend" }, "working time / median: ",
    ...[[0.5, "0.5x"], [1, "median"], [1.25, "1.25x"], [1.5, "1.5x or more"]].map(([r, label]) =>
      el("span", { class: "legend-swatch", style: `background:${heatColour(r)}` }, label)));
  const readout = el("div", { id: "ranks-readout", class: "muted" }, "point at a cell for its rank, host, step and time");
  const element = el("section", { id: "ranks", hidden: "" }, el("h2", {}, "Ranks"), summary,
    box, el("div", { class: "chart heatmap" }, heading, canvas, legend, readout));

  function splitBar(r, longest) {
    const bar = el("span", { class: "split-bar", title: splitKeys.map(([k, label]) => `${label} ${ms(r[k])} ms`).join(", ") });
    splitKeys.forEach(([k], i) => {
      if (r[k] > 0) bar.append(el("span", { style: `width:${(100 * r[k]) / longest}%;background:${palette[i]}` }));
    });
    return bar;
  }

  // Sorts by the column `key`, absent values last, ties by rank.
  function sortRanks() {
    const absent = (x) => x == null || x === "";
    const { key, descending } = sort;
    order = body.ranks.slice().sort((a, b) => {
      const x = a[key], y = b[key];
      if (absent(x) || absent(y)) return absent(x) - absent(y) || a.rank - b.rank;
      const c = typeof x === "string" ? x.localeCompare(y) : x - y;
      return (descending ? -c : c) || a.rank - b.rank;
    });
  }

  function columnHead([label, key], i) {
    const arrow = sort.key === key ? (sort.descending ? " ▾" : " ▴") : "";
    return el("th", { class: i >= 3 ? "num" : null, "data-sort": key, title: `sort the ranks by ${label}`, onclick: () => {
      // A figure sorts largest first (the slow ranks on top), a name or the rank in order.
      sort.descending = sort.key === key ? !sort.descending : i >= 3;
      sort.key = key;
      sortRanks();
      drawHead();
      drawRows();
    } }, label + arrow);
  }

  function drawHead() {
    const swatches = splitKeys.map(([, label], i) => el("span", {}, el("span", { class: "swatch", style: `background:${palette[i]}` }), label, " "));
    table.tHead.replaceChildren(el("tr", {}, ...columns.map(columnHead), el("th", { class: "split-key" }, ...swatches),
      columnHead(["memory used / peak", "mem_used"], 3)));
  }

  function rankRow(r) {
    return el("tr", { "data-rank": r.rank, class: r.slowest ? "slowest" : null, title: r.slowest ? "the slowest rank" : null },
      el("td", {}, String(r.rank)), el("td", {}, r.host || "—"), el("td", {}, r.device || "—"),
      ...[r.step == null ? "—" : String(r.step), ms(r.step_ms), times(r.relative), ...splitKeys.map(([k]) => ms(r[k]))].map((t) => el("td", { class: "num" }, t)),
      el("td", {}, r.step_ms == null ? "" : splitBar(r, longest)),
      el("td", {}, `${format.bytes(r.mem_used)} / ${format.bytes(r.mem_peak)}`));
  }

  // A row of the given height standing in for the rows not drawn.
  function spacer(height) {
    return el("tr", { class: "spacer", "aria-hidden": "true" }, el("td", { colspan: columns.length + 2, style: `height: ${height}px; padding: 0; border: 0` }));
  }

  // Draws the rows in the box's view and some around them. The spacers' heights and the rows
  // in view both come from rowHeight, so a first estimate that the drawn rows belie is
  // replaced by their mean height and the rows drawn again.
  function drawRows(measured = false) {
    const n = order.length;
    const first = Math.max(0, Math.min(n, Math.floor(box.scrollTop / rowHeight) - overscan));
    const last = Math.min(n, first + Math.ceil(Math.max(box.clientHeight, boxHeight) / rowHeight) + 2 * overscan);
    table.tBodies[0].replaceChildren(...(first > 0 ? [spacer(first * rowHeight)] : []), ...order.slice(first, last).map(rankRow),
      ...(last < n ? [spacer((n - last) * rowHeight)] : []));
    const rows = table.tBodies[0].querySelectorAll("tr[data-rank]");
    if (measured || rows.length === 0) return;
    const height = (rows[rows.length - 1].getBoundingClientRect().bottom - rows[0].getBoundingClientRect().top) / rows.length;
    if (!(height > 0) || Math.abs(height - rowHeight) < 0.5) return;
    rowHeight = height;
    drawRows(true);
  }

  function drawTable() {
    longest = Math.max(1e-9, ...body.ranks.map((r) => r.step_ms ?? 0));
    if (!table.tHead) table.append(el("thead"), el("tbody"));
    sortRanks();
    drawHead();
    drawRows();
    const slowest = body.ranks.find((r) => r.slowest);
    summary.textContent = slowest
      ? `At step ${body.step} rank ${slowest.rank}${slowest.host ? ` on ${slowest.host}` : ""} is the slowest: ` +
        `${ms(slowest.working_ms)} ms of work, ${times(slowest.relative)} the median rank's ${ms(body.median_working_ms)} ms.`
      : body.step == null ? "No step logged yet." : `At step ${body.step} no rank is slower than the others.`;
  }

  let frame = 0;
  box.addEventListener("scroll", () => {
    if (frame || !body) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      drawRows();
    });
  }, { passive: true });

  function rowLabel(i) {
    const first = heat.ranks[i], lastRank = first + heat.group - 1;
    return heat.group > 1 ? `r${first}–${lastRank}` : `r${first}`;
  }

  function drawHeat() {
    const rows = heat.ranks.length, n = heat.steps.length;
    const ratio = devicePixelRatio || 1;
    const rowH = Math.max(3, Math.min(18, 320 / Math.max(1, rows)));  // 3 px from 107 rows
    const width = canvas.clientWidth || 800, height = Math.round(rows * rowH + margin.top + margin.bottom);
    canvas.style.height = `${height}px`;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.clearRect(0, 0, width, height);
    const plotW = width - margin.left - margin.right, colW = plotW / Math.max(1, n);
    // A pixel a cell, then the image stretched over the plot without smoothing: 131,072 cells
    // (1,024 ranks by 128 steps) took 120 ms as a rectangle each.
    if (rows > 0 && n > 0) {
      const image = new ImageData(n, rows);
      for (let i = 0; i < rows; i++)
        for (let j = 0; j < n; j++) {
          const r = heat.relative[i][j];
          if (r == null) continue;  // transparent: not logged
          image.data.set([...heatRgb(r), 255], 4 * (i * n + j));
        }
      const cells = new OffscreenCanvas(n, rows);
      cells.getContext("2d").putImageData(image, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(cells, margin.left, margin.top, plotW, rows * rowH);
    }
    ctx.fillStyle = cssVar("--muted");
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const every = Math.max(1, Math.ceil(12 / rowH));
    for (let i = 0; i < rows; i += every) ctx.fillText(rowLabel(i), margin.left - 6, margin.top + (i + 0.5) * rowH);
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const labels = Math.max(2, Math.floor(plotW / 110));
    for (let k = 0; k < labels && n; k++) {
      const j = Math.round((k * (n - 1)) / Math.max(1, labels - 1));
      ctx.fillText(String(heat.steps[j]), margin.left + (j + 0.5) * colW, margin.top + rows * rowH + 5);
    }
    canvas.dataset.rows = rows;
    canvas.dataset.steps = n;
    canvas.pick = (px, py) => {
      const i = Math.floor((py - margin.top) / rowH), j = Math.floor((px - margin.left) / colW);
      return i >= 0 && i < rows && j >= 0 && j < n ? { i, j } : null;
    };
  }

  function describe(i, j) {
    const first = heat.ranks[i], host = places.get(first);
    const who = heat.group > 1 ? `ranks ${rowLabel(i).slice(1)} (the slowest of them)` : `rank ${first}${host ? ` on ${host}` : ""}`;
    const step = heat.step_ms[i][j];
    if (step == null) return `${who} · step ${heat.steps[j]}: not logged`;
    return `${who} · step ${heat.steps[j]}: ${ms(step)} ms, working ${times(heat.relative[i][j])} the median rank's`;
  }

  canvas.addEventListener("mousemove", (event) => {
    const rect = canvas.getBoundingClientRect();
    const cell = heat && canvas.pick?.(event.clientX - rect.left, event.clientY - rect.top);
    readout.textContent = cell ? describe(cell.i, cell.j) : "point at a cell for its rank, host, step and time";
    canvas.title = cell ? readout.textContent : "";
  });

  async function load() {
    if (inFlight) return;
    inFlight = true;
    last = Date.now();
    try {
      const stripColumns = Math.max(16, Math.min(512, Math.floor((canvas.clientWidth || 800) / 4)));
      const [answer, strip] = await Promise.all([getJson(`/api/runs/${run}/ranks`), getJson(`/api/runs/${run}/rank-heat?columns=${stripColumns}&rows=${stripRows}`)]);
      if (answer.ranks.length < 2) return;
      if (answer.slowest !== slowest) {
        slowest = answer.slowest;
        onSlowest(slowest);
      }
      element.hidden = false;
      body = answer;
      places = new Map(body.ranks.map((r) => [r.rank, r.host]));
      heat = strip;
      drawTable();
      drawHeat();
    } finally {
      inFlight = false;
    }
  }

  return {
    element,
    load,
    // New rows arrived: reload, at most every refreshEvery ms (one timer waits for the rest).
    refresh() {
      if (timer) return;
      timer = setTimeout(() => {
        timer = null;
        load().catch(() => {});
      }, Math.max(0, last + refreshEvery - Date.now()));
    },
    close() {
      clearTimeout(timer);
      cancelAnimationFrame(frame);
    },
  };
}
