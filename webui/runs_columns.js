// The runs table's columns: the built-in ones and any config key added as a column (as W&B's
// runs table allows), and the choices of which are hidden, which config keys are shown and
// what the rows are grouped by, remembered in this browser's storage.
import { format } from "/api.js";

// When the window is too narrow for every column, the lowest priority hides first (the
// rightmost of equals); the name never hides. The store's column is there only when the
// server shows several stores (storesOnly).
export const builtinColumns = [
  { key: "status", label: "Status", priority: 10 },
  { key: "name", label: "Name" },
  { key: "store", label: "Store", priority: 5, storesOnly: true, text: (r) => r.store + (r.writable === false ? " (read-only)" : "") },
  { key: "tags", label: "Tags", priority: 6, value: (r) => r.tags.join(",") },
  { key: "layout", label: "Layout", priority: 2 },
  { key: "device", label: "Device", priority: 1 },
  { key: "last_step", label: "Steps", num: true, priority: 9, text: (r) => `${r.last_step ?? "—"}${r.steps ? "/" + r.steps : ""}` },
  { key: "loss", label: "Loss", num: true, priority: 9, text: (r) => format.loss(r.loss) },
  { key: "tokens_per_s", label: "Tokens/s", num: true, priority: 7, text: (r) => format.rate(r.tokens_per_s) },
  { key: "mfu", label: "MFU", num: true, priority: 3, text: (r) => format.percent(r.mfu) },
  { key: "started_at", label: "Started", priority: 5, value: (r) => r.started_at ?? r.created_at, text: (r) => format.minute(r.started_at ?? r.created_at) },
  { key: "duration_s", label: "Duration", num: true, priority: 8, text: (r) => format.duration(r.duration_s) },
];

// {"train": {"lr": 0.01}} -> {"train.lr": 0.01}; a list stays one value.
export function flatConfig(config, prefix = "", out = {}) {
  for (const [key, value] of Object.entries(config || {})) {
    const path = prefix ? `${prefix}.${key}` : key;
    if (value && typeof value === "object" && !Array.isArray(value)) flatConfig(value, path, out);
    else out[path] = value;
  }
  return out;
}

// A config value as a cell, a group or a filter reads it.
export function configText(value) {
  if (value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

// A config key added as a column hides, when the window is narrow, after the device, layout
// and MFU, before the built-in figures.
export function configColumn(key) {
  return { key: "config:" + key, label: key, configKey: key, priority: 4, value: (r) => r.flat[key], text: (r) => configText(r.flat[key]),
    num: (r) => typeof r.flat[key] === "number" };
}

// The columns to hide, in order, until the table fits: lowest priority first, the rightmost
// of equals first.
export function hidingOrder(columns) {
  return columns.map((c, i) => ({ c, i })).filter(({ c }) => c.priority != null)
    .sort((a, b) => a.c.priority - b.c.priority || b.i - a.i).map(({ c }) => c);
}

const storageKey = "kiln-runs-table";
const maxConfigColumns = 20;  // the table stays readable, and the stored choices small

// {hidden: [builtin keys], config: [config keys], group: "" | "tag" | config key}
export function loadChoices() {
  const choices = { hidden: [], config: [], group: "" };
  try {
    const saved = JSON.parse(localStorage.getItem(storageKey) || "{}");
    if (Array.isArray(saved.hidden)) choices.hidden = saved.hidden.filter((k) => typeof k === "string");
    if (Array.isArray(saved.config)) choices.config = saved.config.filter((k) => typeof k === "string").slice(0, maxConfigColumns);
    if (typeof saved.group === "string") choices.group = saved.group;
  } catch {
    // Storage another version wrote, or hand-edited: start from the defaults.
  }
  return choices;
}

export function saveChoices(choices) {
  choices.config = choices.config.slice(0, maxConfigColumns);
  localStorage.setItem(storageKey, JSON.stringify(choices));
}
