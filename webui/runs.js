// The runs table: every run of the store, filtered by status, tag, name or a config key's
// value, grouped by a tag or a config key, sorted by any column, with columns to hide and
// config keys to add as columns (remembered in this browser), and a box per row to pick runs
// to compare. It fits the window: names and tags wrap, and where that is not enough the
// columns of lowest priority hide (runs_columns.js), named above the table. A server that
// shows several stores adds a Store column, and the runs of its read-only stores take no tags.
import { getJson, send, el, address } from "/api.js";
import { builtinColumns, flatConfig, configText, configColumn, hidingOrder, loadChoices, saveChoices } from "/runs_columns.js";

const noTags = "(no tags)";

// Returns what stops it following the window's width when the page is left.
export function renderRuns(view, params) {
  const choices = loadChoices();
  const state = { sort: "started_at", descending: true, runs: [], picked: new Set(), keys: [], severalStores: false };
  const status = el("select", { id: "filter-status" }, ...["", "running", "paused", "completed", "stopped", "failed", "lost", "released"].map((s) => el("option", { value: s }, s || "any status")));
  const tag = el("input", { id: "filter-tag", placeholder: "tag" });
  const name = el("input", { id: "filter-name", placeholder: "name contains" });
  const filterKey = el("select", { id: "filter-key" });
  const filterValue = el("input", { id: "filter-value", placeholder: "value", size: 10 });
  const groupBy = el("select", { id: "group-by" });
  const columnsMenu = el("details", { id: "columns-menu", class: "menu" });
  const compare = el("button", { id: "compare-picked", disabled: "" }, "Compare picked");
  const table = el("table", { id: "runs" });
  const wrap = el("div", { class: "table-wrap" }, table);
  const fitNote = el("p", { id: "runs-fit", class: "muted", hidden: "" });
  const message = el("p", { class: "muted" });
  const configKeys = el("datalist", { id: "config-keys" });
  let sweepNames = new Map();  // sweep id -> name, for the links of the runs a sweep launched
  status.value = params.get("status") || "";
  view.append(el("h1", {}, "Runs"),
    el("div", { class: "filters" }, status, tag, name, el("span", { class: "muted" }, "where"), filterKey, "=", filterValue,
      el("span", { class: "muted" }, "group by"), groupBy, columnsMenu, compare),
    fitNote, wrap, message, configKeys);

  compare.addEventListener("click", () => {
    location.hash = "#/compare?runs=" + [...state.picked].join(",");
  });

  // The built-in columns this server has: the store's only when it shows several.
  function builtins() {
    return builtinColumns.filter((c) => !c.storesOnly || state.severalStores);
  }

  function columns() {
    return [...builtins().filter((c) => !choices.hidden.includes(c.key)), ...choices.config.map(configColumn)];
  }

  function changed() {
    saveChoices(choices);
    fillSelectors();
    draw();
  }

  // The config keys the runs have, for the filter, the grouping and the column menu.
  function fillSelectors() {
    const option = (value, label) => el("option", { value }, label ?? value);
    const keep = (select, value) => { select.value = [...select.options].some((o) => o.value === value) ? value : ""; };
    const filterWas = filterKey.value;
    filterKey.replaceChildren(option("", "config key"), ...state.keys.map((k) => option(k)));
    keep(filterKey, filterWas);
    groupBy.replaceChildren(option("", "nothing"), option("tag", "tag"), ...state.keys.map((k) => option(k)));
    keep(groupBy, choices.group);
    configKeys.replaceChildren(...state.keys.filter((k) => !choices.config.includes(k)).map((k) => option(k)));

    const toggle = (c) => el("label", {}, el("input", { type: "checkbox", id: `column-${c.key}`, checked: choices.hidden.includes(c.key) ? null : "",
      onchange: (e) => {
        choices.hidden = e.target.checked ? choices.hidden.filter((k) => k !== c.key) : [...choices.hidden, c.key];
        changed();
      } }), " ", c.label);
    const added = (key) => el("label", {}, el("input", { type: "checkbox", checked: "", "data-config-key": key,
      onchange: () => { choices.config = choices.config.filter((k) => k !== key); changed(); } }), " ", key);
    const input = el("input", { id: "add-column", list: "config-keys", placeholder: "config key, e.g. train.lr" });
    const add = () => {
      const key = input.value.trim();
      if (!key) return;
      if (!state.keys.includes(key)) {
        message.textContent = `No run's config has ${key}.`;
        return;
      }
      message.textContent = "";
      if (!choices.config.includes(key)) choices.config.push(key);
      changed();
    };
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") add(); });
    const wasOpen = columnsMenu.open;
    columnsMenu.replaceChildren(el("summary", {}, "Columns"), el("div", { class: "menu-body" },
      ...builtins().filter((c) => c.key !== "name").map(toggle), ...choices.config.map(added),
      el("div", {}, input, " ", el("button", { id: "add-column-button", onclick: add }, "Add column"))));
    columnsMenu.open = wasOpen;
  }

  async function load() {
    const query = new URLSearchParams({ config: "1" });
    if (status.value) query.set("status", status.value);
    if (tag.value) query.set("tag", tag.value);
    if (name.value) query.set("name", name.value);
    try {
      state.runs = (await getJson("/api/runs?" + query)).map((r) => ({ ...r, flat: flatConfig(r.config) }));
      state.keys = [...new Set(state.runs.flatMap((r) => Object.keys(r.flat)))].sort();
      state.severalStores = new Set(state.runs.map((r) => r.store)).size > 1 || state.runs.some((r) => r.writable === false);
      if (state.runs.some((r) => r.sweep_id != null)) sweepNames = new Map((await getJson("/api/sweeps")).map((sw) => [sw.id, sw.name]));
      message.textContent = state.runs.length ? "" : "No runs match. `kiln train` records one.";
      fillSelectors();
      draw();
    } catch (e) {
      message.textContent = e.message;
      message.className = "error";
    }
  }

  // The runs the where-filter keeps: a number typed matches the same number (0.01 = 1e-2).
  function filtered() {
    const key = filterKey.value, typed = filterValue.value.trim();
    if (!key || !typed) return state.runs;
    return state.runs.filter((r) => {
      const value = r.flat[key];
      return configText(value) === typed || (typeof value === "number" && Number(typed) === value);
    });
  }

  // [[group label, runs]], in order of the grouped-by values; one unlabelled group when not grouped.
  function groups(rows) {
    const by = groupBy.value;
    if (!by) return [[null, rows]];
    const byValue = new Map();
    const addTo = (label, value, r) => {
      if (!byValue.has(label)) byValue.set(label, { value, runs: [] });
      byValue.get(label).runs.push(r);
    };
    for (const r of rows) {
      if (by === "tag") (r.tags.length ? r.tags : [noTags]).forEach((t) => addTo(t, t === noTags ? "\uffff" : t, r));
      else addTo(configText(r.flat[by]), r.flat[by], r);
    }
    const order = (a, b) => (typeof a === "number" && typeof b === "number" ? a - b : String(a ?? "\uffff").localeCompare(String(b ?? "\uffff")));
    return [...byValue.entries()].sort((a, b) => order(a[1].value, b[1].value)).map(([label, g]) => [label, g.runs]);
  }

  // Long values (a CPU's full name, a list of data paths) are cut with an ellipsis, whole in
  // their tooltip, so the table fits the window.
  function cell(c, r) {
    if (c.key === "name")
      return el("td", { class: "name-cell", "data-col": c.key }, el("a", { class: "clip wide", href: `#/run/${encodeURIComponent(address(r))}`, title: address(r) }, r.name),
        r.alerts > 0 ? el("span", { class: "alert-badge", title: `${r.alerts} alert${r.alerts > 1 ? "s" : ""}; the latest: ${r.latest_alert}` }, String(r.alerts)) : null,
        r.sweep_id != null ? el("a", { class: "sweep-link", href: `#/sweep/${r.sweep_id}`, title: `point ${r.sweep_point} of sweep ${sweepNames.get(r.sweep_id) ?? r.sweep_id}` },
          `${sweepNames.get(r.sweep_id) ?? "sweep"} #${r.sweep_point}`) : null);
    if (c.key === "status") return el("td", { class: `status status-${r.status}`, "data-col": c.key }, r.status);
    // A run of a read-only store keeps the tags it has: no button to add one.
    if (c.key === "tags") return el("td", { class: "tags-cell", "data-col": c.key, title: r.tags.join(", ") || null },
      ...r.tags.map((t) => el("span", { class: "tag" }, t)),
      r.writable === false ? null : el("button", { title: "Add a tag", onclick: () => addTag(r) }, "+"));
    const text = String(c.text ? c.text(r) : r[c.key] || "—");
    const num = typeof c.num === "function" ? c.num(r) : c.num;
    return el("td", { class: num ? "num" : "", "data-col": c.key }, el("span", { class: "clip", title: text }, text));
  }

  function draw() {
    const shown = columns();
    const column = shown.find((c) => c.key === state.sort) || builtinColumns.find((c) => c.key === "started_at");
    const value = column.value || ((r) => r[column.key]);
    const sorted = [...filtered()].sort((a, b) => {
      const x = value(a), y = value(b);
      const order = x == null ? 1 : y == null ? -1 : x < y ? -1 : x > y ? 1 : 0;
      return state.descending ? -order : order;
    });
    const head = el("tr", {}, el("th", {}, ""), ...shown.map((c) =>
      el("th", { class: c.num === true ? "num" : "", "data-col": c.key, onclick: () => { state.descending = state.sort === c.key ? !state.descending : false; state.sort = c.key; draw(); } },
        c.label + (state.sort === c.key ? (state.descending ? " ▾" : " ▴") : ""))));
    const row = (r) => el("tr", { "data-run": address(r), "data-store": r.store, class: r.writable === false ? "read-only" : null,
      title: r.writable === false ? `read-only: a run of store ${r.store}, which this server shows but does not change` : null },
      el("td", {}, el("input", { type: "checkbox", checked: state.picked.has(address(r)) ? "" : null, onchange: (e) => {
        e.target.checked ? state.picked.add(address(r)) : state.picked.delete(address(r));
        compare.disabled = state.picked.size < 2;
      } })),
      ...shown.map((c) => cell(c, r)));
    const body = groups(sorted).flatMap(([label, runs]) => [
      ...(label === null ? [] : [el("tr", { class: "group", "data-group": label },
        el("td", { colspan: shown.length + 1 }, el("b", {}, groupBy.value === "tag" ? `tag ${label}` : `${groupBy.value} = ${label}`),
          ` · ${runs.length} run${runs.length === 1 ? "" : "s"}`))]),
      ...runs.map(row)]);
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
    fit(shown);
  }

  // Hides columns, lowest priority first, while the table is wider than its box; the note
  // above it names them.
  function fit(shown) {
    const hidden = [];
    for (const c of hidingOrder(shown)) {
      if (table.offsetWidth <= wrap.clientWidth) break;
      for (const cell of table.querySelectorAll(`[data-col="${CSS.escape(c.key)}"]`)) cell.hidden = true;
      hidden.push(c.label);
    }
    fitNote.hidden = hidden.length === 0;
    fitNote.textContent = hidden.length ? `Hidden to fit the window: ${hidden.join(", ")}. A wider window shows them; Columns chooses which to show.` : "";
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
  filterKey.addEventListener("change", draw);
  filterValue.addEventListener("input", draw);
  groupBy.addEventListener("change", () => { choices.group = groupBy.value; changed(); });
  // A window of another width fits the columns again.
  let fittedWidth = 0;
  const refit = () => {
    if (wrap.clientWidth === fittedWidth) return;
    fittedWidth = wrap.clientWidth;
    draw();
  };
  window.addEventListener("resize", refit);
  load();
  return () => window.removeEventListener("resize", refit);
}
