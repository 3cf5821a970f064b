// The sweeps list and a sweep's page (docs/sweeps.md#viewing-a-sweep): its state and command
// line, the best point (of the completed ones; the best so far, partial, before any completes),
// a sortable table of its points (each swept parameter, the run, its status, final and
// best loss and validation loss, tokens/s) with the best point marked, parallel coordinates
// of the points and a scatter of the loss against a chosen parameter. A live sweep's page
// asks for new figures every few seconds, one request at a time, until it ends or is left.
import { getJson, el, format, address, storePrefix } from "/api.js";
import { parallelPlot, scatterPlot, valueText, lossText } from "/sweep_plots.js";

const refreshEvery = 5000;  // ms between a live sweep's reads
const metricLabels = { final_valid_loss: "final valid loss", final_loss: "final loss" };

function progressText(s) {
  return `${s.completed}/${s.points} done, ${s.running} running, ${s.failed} failed` +
    (s.launched < s.points ? `, ${s.points - s.launched} to launch` : "");
}

export function renderSweeps(view) {
  const table = el("table", { id: "sweeps" });
  const message = el("p", { class: "muted" });
  view.append(el("h1", {}, "Sweeps"), el("div", { class: "table-wrap" }, table), message);
  getJson("/api/sweeps").then((sweeps) => {
    message.textContent = sweeps.length ? "" : "No sweeps yet. `kiln sweep` runs one.";
    table.replaceChildren(el("thead", {}, el("tr", {}, ...["Name", "State", "Points", "Progress", "Created"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...sweeps.map((s) => el("tr", { "data-sweep": address(s) },
        el("td", {}, el("a", { href: `#/sweep/${encodeURIComponent(address(s))}` }, address(s))),
        el("td", { class: `status status-${s.status}` }, s.status), el("td", { class: "num" }, String(s.points)),
        el("td", {}, progressText(s)), el("td", {}, format.minute(s.created_at))))));
  }).catch((e) => { message.textContent = e.message; message.className = "error"; });
}

// Returns what stops the page's reads when it is left.
export function renderSweep(view, name) {
  const state = { sort: "point", descending: false, scatterKey: null, body: null };
  let timer = null, left = false;

  const title = el("h1", {}, "Sweep ", name);
  const facts = el("div", { class: "facts" });
  const command = el("pre", { class: "config", id: "sweep-command" });
  const table = el("table", { id: "sweep-points" });
  const hover = el("p", { id: "sweep-hover", class: "muted" }, "point at a line for its point");
  const parallelBox = el("div", { class: "chart", id: "sweep-parallel-box" });
  const scatterKey = el("select", { id: "sweep-scatter-key", onchange: () => { state.scatterKey = scatterKey.value; drawScatter(); } });
  const scatterBox = el("div", { class: "chart", id: "sweep-scatter-box" });
  const message = el("p", { class: "muted" });
  view.append(title, facts, command, el("div", { class: "table-wrap" }, table),
    el("h2", {}, "Parallel coordinates"), parallelBox, hover,
    el("h2", {}, "Loss against a parameter"), el("div", { class: "controls" }, "parameter ", scatterKey), scatterBox, message);

  // The figure the points are judged and coloured by: the one the best point was chosen on.
  const metric = () => state.body.best?.metric || "final_loss";
  const points = () => state.body.points.map((p) => ({ ...p, loss: p[metric()], best: p.point === state.body.best?.point }));

  function drawFacts(s, best) {
    facts.replaceChildren(el("span", { id: "sweep-state", class: `status status-${s.status}` }, s.status),
      el("span", { id: "sweep-progress" }, progressText(s)),
      best ? el("span", { id: "sweep-best" }, `${best.label}: point ${best.point}, ${metricLabels[best.metric]} ${format.loss(best.value)}`) : null,
      el("span", {}, `created ${format.time(s.created_at)}`), s.host ? el("span", {}, `on ${s.host}`) : null);
    command.textContent = s.command_line || "(no command line recorded)";
  }

  function columns(parameters) {
    const figure = (key, label, f = format.loss) => ({ key, label, num: true, value: (p) => p[key], text: (p) => f(p[key]) });
    return [
      { key: "point", label: "Point", num: true, value: (p) => p.point, text: (p) => String(p.point) },
      ...parameters.map((k) => ({ key: "param:" + k, label: k, num: true, value: (p) => p.params[k], text: (p) => valueText(p.params[k]) })),
      { key: "run", label: "Run", value: (p) => p.run_name },
      { key: "status", label: "Status", value: (p) => p.status },
      figure("last_step", "Steps", (x) => (x == null ? "—" : String(x))),
      figure("final_loss", "Final loss"), figure("best_loss", "Best loss"),
      figure("final_valid_loss", "Final valid"), figure("best_valid_loss", "Best valid"),
      figure("tokens_per_s", "Tokens/s", format.rate),
    ];
  }

  function cell(c, p) {
    if (c.key === "run")
      return el("td", {}, p.run_name ? el("a", { class: "clip wide", href: `#/run/${encodeURIComponent(storePrefix(state.body.sweep.id) + p.run_name)}`, title: p.run_name }, p.run_name) : "—");
    if (c.key === "status") return el("td", { class: `status status-${p.status}` }, p.status);
    return el("td", { class: c.num ? "num" : "", "data-key": c.key }, c.text(p));
  }

  function drawTable() {
    const shown = columns(state.body.parameters);
    const column = shown.find((c) => c.key === state.sort) || shown[0];
    const sorted = [...state.body.points].sort((a, b) => {
      const x = column.value(a), y = column.value(b);
      const order = x == null ? 1 : y == null ? -1 : x < y ? -1 : x > y ? 1 : 0;
      return state.descending && x != null && y != null ? -order : order;
    });
    const head = el("tr", {}, ...shown.map((c) => el("th", { class: c.num ? "num" : "", "data-key": c.key,
      onclick: () => { state.descending = state.sort === c.key ? !state.descending : false; state.sort = c.key; drawTable(); } },
    c.label + (state.sort === c.key ? (state.descending ? " ▾" : " ▴") : ""))));
    const best = state.body.best?.point;
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...sorted.map((p) =>
      el("tr", { "data-point": p.point, class: p.point === best ? "best" : null, title: p.point === best ? `${state.body.best.label} by ${metricLabels[metric()]}` : null },
        ...shown.map((c) => cell(c, p))))));
  }

  function drawParallel() {
    const shown = points().filter((p) => p.loss != null);
    parallelBox.replaceChildren(shown.length
      ? parallelPlot(points(), state.body.parameters, metricLabels[metric()], (point) => {
        const p = point == null ? null : shown.find((q) => String(q.point) === point);
        hover.textContent = p ? `point ${p.point}: ${state.body.parameters.map((k) => `${k}=${valueText(p.params[k])}`).join(", ")} · ` +
          `${lossText(p, metricLabels[metric()], format.loss)}${p.run_name ? " · " + p.run_name : ""}` : "point at a line for its point";
      })
      : el("p", { class: "muted" }, "No point has a loss yet."));
  }

  function drawScatter() {
    const numeric = state.body.parameters.filter((k) => state.body.points.some((p) => typeof p.params[k] === "number"));
    if (!numeric.includes(state.scatterKey)) state.scatterKey = numeric[0] ?? null;
    scatterKey.replaceChildren(...numeric.map((k) => el("option", { value: k }, k)));
    scatterKey.value = state.scatterKey ?? "";
    const shown = points().filter((p) => p.loss != null && typeof p.params[state.scatterKey] === "number");
    scatterBox.replaceChildren(shown.length ? scatterPlot(points(), state.scatterKey, metricLabels[metric()])
      : el("p", { class: "muted" }, numeric.length ? "No point has a loss yet." : "No swept parameter has numeric values."));
  }

  async function load() {
    timer = null;
    try {
      state.body = await getJson(`/api/sweeps/${encodeURIComponent(name)}`);
    } catch (e) {
      message.textContent = e.message;
      message.className = "error";
      return;
    }
    if (left) return;
    message.textContent = "";
    title.replaceChildren("Sweep ", state.body.sweep.name);
    drawFacts(state.body.sweep, state.body.best);
    drawTable();
    drawParallel();
    drawScatter();
    if (state.body.sweep.status === "live" || state.body.sweep.running > 0) timer = setTimeout(load, refreshEvery);
  }

  load();
  return () => {
    left = true;
    clearTimeout(timer);
  };
}
