// The runs table: every run of the store, filtered by status, tag and name, sorted by any
// column, with a box per row to pick runs to compare.
import { getJson, send, el, format } from "/api.js";

const columns = [
  { key: "status", label: "Status" },
  { key: "name", label: "Name" },
  { key: "tags", label: "Tags", value: (r) => r.tags.join(",") },
  { key: "layout", label: "Layout" },
  { key: "device", label: "Device" },
  { key: "last_step", label: "Steps", num: true, text: (r) => `${r.last_step ?? "—"}${r.steps ? "/" + r.steps : ""}` },
  { key: "loss", label: "Loss", num: true, text: (r) => format.loss(r.loss) },
  { key: "tokens_per_s", label: "Tokens/s", num: true, text: (r) => format.rate(r.tokens_per_s) },
  { key: "mfu", label: "MFU", num: true, text: (r) => format.percent(r.mfu) },
  { key: "started_at", label: "Started", text: (r) => format.time(r.started_at ?? r.created_at) },
  { key: "duration_s", label: "Duration", num: true, text: (r) => format.duration(r.duration_s) },
];

export function renderRuns(view, params) {
  const state = { sort: "started_at", descending: true, runs: [], picked: new Set() };
  const status = el("select", { id: "filter-status" }, ...["", "running", "paused", "completed", "stopped", "failed", "lost"].map((s) => el("option", { value: s }, s || "any status")));
  const tag = el("input", { id: "filter-tag", placeholder: "tag" });
  const name = el("input", { id: "filter-name", placeholder: "name contains" });
  const compare = el("button", { id: "compare-picked", disabled: "" }, "Compare picked");
  const table = el("table", { id: "runs" });
  const message = el("p", { class: "muted" });
  status.value = params.get("status") || "";
  view.append(el("h1", {}, "Runs"), el("div", { class: "filters" }, status, tag, name, compare), table, message);

  compare.addEventListener("click", () => {
    location.hash = "#/compare?runs=" + [...state.picked].join(",");
  });

  async function load() {
    const query = new URLSearchParams();
    if (status.value) query.set("status", status.value);
    if (tag.value) query.set("tag", tag.value);
    if (name.value) query.set("name", name.value);
    try {
      state.runs = await getJson("/api/runs?" + query);
      message.textContent = state.runs.length ? "" : "No runs match. `kiln train` records one.";
      draw();
    } catch (e) {
      message.textContent = e.message;
      message.className = "error";
    }
  }

  function draw() {
    const column = columns.find((c) => c.key === state.sort);
    const value = column.value || ((r) => r[column.key]);
    const rows = [...state.runs].sort((a, b) => {
      const x = value(a), y = value(b);
      const order = x == null ? 1 : y == null ? -1 : x < y ? -1 : x > y ? 1 : 0;
      return state.descending ? -order : order;
    });
    const head = el("tr", {}, el("th", {}, ""), ...columns.map((c) =>
      el("th", { class: c.num ? "num" : "", onclick: () => { state.descending = state.sort === c.key ? !state.descending : false; state.sort = c.key; draw(); } },
        c.label + (state.sort === c.key ? (state.descending ? " ▾" : " ▴") : ""))));
    const body = rows.map((r) => el("tr", { "data-run": r.name },
      el("td", {}, el("input", { type: "checkbox", checked: state.picked.has(r.name) ? "" : null, onchange: (e) => {
        e.target.checked ? state.picked.add(r.name) : state.picked.delete(r.name);
        compare.disabled = state.picked.size < 2;
      } })),
      ...columns.map((c) => {
        if (c.key === "name") return el("td", {}, el("a", { href: `#/run/${encodeURIComponent(r.name)}` }, r.name));
        if (c.key === "status") return el("td", { class: `status status-${r.status}` }, r.status);
        if (c.key === "tags") return el("td", {}, ...r.tags.map((t) => el("span", { class: "tag" }, t)),
          el("button", { title: "Add a tag", onclick: () => addTag(r) }, "+"));
        return el("td", { class: c.num ? "num" : "" }, c.text ? c.text(r) : r[c.key] || "—");
      })));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
  }

  async function addTag(run) {
    const typed = prompt(`Tag for ${run.name}:`);
    if (!typed) return;
    try {
      await send("POST", `/api/runs/${run.id}/tags`, { add: [typed] });
      load();
    } catch (e) {
      alert(e.message);
    }
  }

  for (const input of [status, tag, name]) input.addEventListener("change", load);
  load();
}
