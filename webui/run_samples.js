// The run page's samples: the text the model wrote at its validation steps, newest step first,
// each under its step, a step's prompts in the config's order (their slot). When a run has
// none, the config says why, and how to get them.
import { el } from "/api.js";

const shown = 20;  // samples kept on the page (the API's default)

function whyNone(config) {
  const t = config.train || {}, p = config.parallel || {};
  if (!(t.sample_tokens > 0)) return "No samples: set train.sample_tokens (and train.sample_prompt) to have the model write at each validation step.";
  if ((p.tp || 1) > 1 || (p.pp || 1) > 1) return "No samples: each rank holds part of the model (tensor or pipeline parallel); sample from a checkpoint with kiln generate.";
  if (!(t.eval_interval > 0) || !(t.eval_iters > 0)) return "No samples yet: the model writes at each validation step, and this run does not validate (train.eval_interval, train.eval_iters).";
  return "No samples yet: the model writes at each validation step.";
}

const key = (s) => `${s.step}/${s.slot ?? 0}`;
const newestFirst = (a, b) => b.dataset.step - a.dataset.step || a.dataset.slot - b.dataset.slot;

function article(s) {
  const slot = s.slot ?? 0;
  return el("article", { class: "sample", "data-step": s.step, "data-slot": slot },
    el("div", { class: "sample-step muted" }, `step ${s.step}`, slot > 0 ? ` · prompt ${slot + 1}` : "",
      s.temperature != null ? ` · temperature ${s.temperature}` : ""),
    el("p", {}, el("b", {}, s.prompt), s.text));
}

export function samplesSection(config) {
  const list = el("div", { id: "samples", class: "samples" });
  const note = el("p", { class: "muted", id: "samples-note" }, whyNone(config));
  return {
    element: el("div", {}, note, list),
    // Rows from the history or the live stream, in any order; a sample already shown is skipped.
    add(rows) {
      const have = new Set([...list.children].map((a) => `${a.dataset.step}/${a.dataset.slot}`));
      const fresh = rows.filter((s) => !have.has(key(s))).map(article);
      const kept = [...list.children, ...fresh].sort(newestFirst).slice(0, shown);
      list.replaceChildren(...kept);
      note.hidden = kept.length > 0;
    },
  };
}
