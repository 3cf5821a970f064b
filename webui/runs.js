// The runs table: the store's runs (or several stores'), filtered by status, a search (words
// in the name or a tag, KEY=VALUE words for config values) or a config key's value, grouped by
// a tag or a config key, sorted by any column, with columns to hide and config keys to add as
// columns (remembered in this browser), and a box per row to pick runs to compare. The server
// filters, sorts, groups and pages (GET /api/runs); the table asks for the pages the window
// shows and keeps only those around it, so 10,000 runs cost what a screenful does. It fits the
// window: names and tags wrap, and where that is not enough the columns of lowest priority
// hide (runs_columns.js), named above the table. A server that shows several stores adds a
// Store column, and the runs of its read-only stores take no tags.
import { getJson, send, el, address } from "/api.js";
import { builtinColumns, flatConfig, configText, configColumn, hidingOrder, loadChoices, saveChoices } from "/runs_columns.js";

const pageSize = 100;       // runs per request
const keptPages = 12;       // pages kept around the window; the rest are asked for again
const rowEstimate = 34;     // px: a row's height before it is drawn (names and tags may wrap)
const overscan = 15;        // rows drawn above and below the window
const typingPause = 300;    // ms: a search or filter value is sent once typing pauses

// Returns what stops it following the window when the page is left.
export function renderRuns(view, params) {
  const choices = loadChoices();
  // pages: page number -> rows (or "asked" while on its way); generation: bumped by each
  // change of what is asked, so an answer to an older question is dropped.
  const state = { sort: "started_at", descending: true, total: 0, groups: [], stores: 1, keys: [], pages: new Map(),
    generation: 0, picked: new Set() };
  const status = el("select", { id: "filter-status" }, ...["", "running", "paused", "completed", "stopped", "failed", "lost", "released"].map((s) => el("option", { value: s }, s || "any status")));
  const search = el("input", { id: "filter-search", type: "search", size: 28, placeholder: "search name, tag, or key=value" });
  const filterKey = el("select", { id: "filter-key" });
  const filterValue = el("input", { id: "filter-value", placeholder: "value", size: 10 });
  const groupBy = el("select", { id: "group-by" });
  const columnsMenu = el("details", { id: "columns-menu", class: "menu" });
  const compare = el("button", { id: "compare-picked", disabled: "" }, "Compare picked");
  const count = el("span", { id: "runs-count", class: "muted" });
  const table = el("table", { id: "runs" });
  const wrap = el("div", { class: "table-wrap" }, table);
  const fitNote = el("p", { id: "runs-fit", class: "muted", hidden: "" });
  const message = el("p", { class: "muted" });
  const configKeys = el("datalist", { id: "config-keys" });
  let sweepNames = new Map();  // sweep id -> name, for the links of the runs a sweep launched
  let sweepsAsked = false;
  status.value = params.get("status") || "";
  view.append(el("h1", {}, "Runs ", count),
    el("div", { class: "filters" }, status, search, el("span", { class: "muted" }, "where"), filterKey, "=", filterValue,
      el("span", { class: "muted" }, "group by"), groupBy, columnsMenu, compare),
    fitNote, wrap, message, configKeys);

  compare.addEventListener("click", () => {
    location.hash = "#/compare?runs=" + [...state.picked].join(",");
  });

  // The built-in columns this server has: the store's only when it shows several.
  function builtins() {
    return builtinColumns.filter((c) => !c.storesOnly || state.stores > 1);
  }

  function columns() {
    return [...builtins().filter((c) => !choices.hidden.includes(c.key)), ...choices.config.map(configColumn)];
  }

  // The columns show at once; the rows follow with what the new choices ask the server for.
  function changed() {
    saveChoices(choices);
    fillSelectors();
    draw();
    reload();
  }

  // The config keys of the store's newest runs, for the filter, the grouping and the column menu.
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
        message.textContent = `No recent run's config has ${key}.`;
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

  // What the table asks the server for, less the page.
  function question() {
    const query = new URLSearchParams({ sort: state.sort, order: state.descending ? "desc" : "asc" });
    if (status.value) query.set("status", status.value);
    if (search.value.trim()) query.set("q", search.value.trim());
    if (filterKey.value && filterValue.value.trim()) query.set("where", `${filterKey.value}=${filterValue.value.trim()}`);
    if (choices.group) query.set("group", choices.group);
    if (choices.config.length) query.set("config", "1");
    return query;
  }

  // The config keys of the newest runs, once, after the first rows are drawn: parsing
  // hundreds of configs would otherwise hold the first rows back.
  async function fetchKeys() {
    try {
      state.keys = (await getJson("/api/config-keys")).keys;
    } catch (e) {
      message.textContent = e.message;
      message.className = "error";
    }
    fillSelectors();
  }

  async function fetchPage(page, thenKeys = false) {
    const generation = state.generation;
    state.pages.set(page, "asked");
    const query = question();
    query.set("offset", page * pageSize);
    query.set("limit", pageSize);
    try {
      const answer = await getJson("/api/runs?" + query);
      if (generation !== state.generation) return;
      state.pages.set(page, answer.runs.map((r) => ({ ...r, flat: flatConfig(r.config) })));
      state.total = answer.total;
      state.groups = answer.groups || [];
      state.stores = answer.stores;
      message.className = "muted";
      message.textContent = answer.total ? "" : "No runs match. `kiln train` records one.";
      // Grouped by tag, a run with two tags is a row in each group.
      count.textContent = `${answer.total} ${choices.group === "tag" ? "rows" : answer.total === 1 ? "run" : "runs"}`;
      draw();
      if (thenKeys) fetchKeys();
      // The sweeps' names for the links, once, after the rows are drawn.
      if (!sweepsAsked && answer.runs.some((r) => r.sweep_id != null)) {
        sweepsAsked = true;
        sweepNames = new Map((await getJson("/api/sweeps")).map((sw) => [sw.id, sw.name]));
        draw();
      }
    } catch (e) {
      if (generation !== state.generation) return;
      state.pages.delete(page);
      message.textContent = e.message;
      message.className = "error";
    }
  }

  // Asks everything again: what is shown changed (a filter, the order, the columns).
  function reload() {
    state.generation++;
    state.pages = new Map();
    fetchPage(0, state.keys.length === 0);
  }

  // The table's items in order: with groups, each group's header then its runs. Item k is
  // {group} or {row: the run's place in the server's order}.
  function itemCount() {
    return state.total + state.groups.length;
  }
  function itemAt(k) {
    if (!state.groups.length) return { row: k };
    let start = 0, offset = 0;
    for (const group of state.groups) {
      if (k === start) return { group };
      if (k <= start + group.runs) return { row: offset + k - start - 1 };
      start += group.runs + 1;
      offset += group.runs;
    }
    return { row: state.total };
  }
  function rowAt(place) {
    const page = state.pages.get(Math.floor(place / pageSize));
    return Array.isArray(page) ? page[place % pageSize] : undefined;
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

  function runRow(r, shown) {
    return el("tr", { "data-run": address(r), "data-store": r.store, class: r.writable === false ? "read-only" : null,
      title: r.writable === false ? `read-only: a run of store ${r.store}, which this server shows but does not change` : null },
      el("td", {}, el("input", { type: "checkbox", checked: state.picked.has(address(r)) ? "" : null, onchange: (e) => {
        e.target.checked ? state.picked.add(address(r)) : state.picked.delete(address(r));
        compare.disabled = state.picked.size < 2;
      } })),
      ...shown.map((c) => cell(c, r)));
  }

  function groupRow(group, shown) {
    return el("tr", { class: "group", "data-group": group.label },
      el("td", { colspan: shown.length + 1 }, el("b", {}, choices.group === "tag" ? `tag ${group.label}` : `${choices.group} = ${group.label}`),
        ` · ${group.runs} run${group.runs === 1 ? "" : "s"}`));
  }

  // A row of the given height standing in for the rows not drawn.
  function spacer(height, shown) {
    return el("tr", { class: "spacer", "aria-hidden": "true" }, el("td", { colspan: shown.length + 1, style: `height: ${height}px; padding: 0; border: 0` }));
  }

  // Draws the items the window shows and some around them, asking for the pages they need.
  function draw() {
    const shown = columns();
    const head = el("tr", {}, el("th", {}, ""), ...shown.map((c) =>
      el("th", { class: c.num === true ? "num" : "", "data-col": c.key, onclick: () => {
        state.descending = state.sort === c.key ? !state.descending : false;
        state.sort = c.key;
        reload();
      } }, c.label + (state.sort === c.key ? (state.descending ? " ▾" : " ▴") : ""))));
    const items = itemCount();
    const above = Math.max(0, -table.getBoundingClientRect().top);
    const first = Math.max(0, Math.min(items, Math.floor(above / rowEstimate) - overscan));
    const last = Math.min(items, first + Math.ceil(innerHeight / rowEstimate) + 2 * overscan);
    const rows = [];
    const wanted = new Set();
    for (let k = first; k < last; k++) {
      const item = itemAt(k);
      if (item.group) {
        rows.push(groupRow(item.group, shown));
        continue;
      }
      const page = Math.floor(item.row / pageSize);
      wanted.add(page);
      const r = rowAt(item.row);
      rows.push(r ? runRow(r, shown) : el("tr", { class: "loading" }, el("td", { colspan: shown.length + 1, class: "muted" }, "…")));
    }
    table.replaceChildren(el("thead", {}, head),
      el("tbody", {}, ...(first > 0 ? [spacer(first * rowEstimate, shown)] : []), ...rows,
        ...(last < items ? [spacer((items - last) * rowEstimate, shown)] : [])));
    for (const page of wanted) if (!state.pages.has(page)) fetchPage(page);
    forgetFarPages(wanted);
    fit(shown);
  }

  // Keeps the pages nearest the window, at most keptPages: the table's memory stays bounded
  // however far it is scrolled.
  function forgetFarPages(wanted) {
    if (state.pages.size <= keptPages || wanted.size === 0) return;
    const middle = [...wanted].reduce((a, b) => a + b, 0) / wanted.size;
    const far = [...state.pages.keys()].filter((p) => !wanted.has(p)).sort((a, b) => Math.abs(b - middle) - Math.abs(a - middle));
    for (const page of far.slice(0, state.pages.size - keptPages)) state.pages.delete(page);
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
      reload();
    } catch (e) {
      alert(e.message);
    }
  }

  let typing = 0;
  const afterTyping = () => {
    clearTimeout(typing);
    typing = setTimeout(reload, typingPause);
  };
  status.addEventListener("change", reload);
  filterKey.addEventListener("change", reload);
  for (const input of [search, filterValue]) input.addEventListener("input", afterTyping);
  groupBy.addEventListener("change", () => { choices.group = groupBy.value; changed(); });
  // Scrolling draws the rows it brings into the window (once a frame); a window of another
  // width fits the columns again.
  let frame = 0;
  const redraw = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      draw();
    });
  };
  window.addEventListener("scroll", redraw, { passive: true });
  window.addEventListener("resize", redraw);
  reload();
  return () => {
    clearTimeout(typing);
    window.removeEventListener("scroll", redraw);
    window.removeEventListener("resize", redraw);
  };
}
