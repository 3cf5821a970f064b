// A fork's place among its runs (kiln runs fork): the line naming the run it was forked from
// and the runs forked from it, and its ancestors' loss curves up to the steps it branched at,
// which the run page draws before the fork's own so the curve reads as one that continues.
import { getJson, el, address } from "/api.js";

// At most this many points of each ancestor's curve.
const ancestorPoints = 1000;

// A link's id is its address: "LABEL:ID" for a run of a store shown beside the served one.
function runLink(link) {
  return el("a", { href: `#/run/${encodeURIComponent(address(link))}` }, link.name);
}

export function lineageSection() {
  const element = el("p", { id: "run-lineage", class: "lineage", hidden: "" });
  // Each ancestor's segment, the nearest first: {name, steps, times, ys}.
  let segments = [];

  function show(lineage) {
    const ancestors = lineage?.ancestors || [], forks = lineage?.forks || [];
    element.hidden = ancestors.length === 0 && forks.length === 0;
    const parts = [];
    if (ancestors.length) {
      parts.push("forked from ");
      // The chain, oldest first: base @ 400 → low-lr @ 600 → this run.
      [...ancestors].reverse().forEach((a, i) => {
        if (i) parts.push(" → ");
        parts.push(runLink(a), ` at step ${a.step}`);
      });
      parts.push(" → this run");
    }
    if (forks.length) {
      if (parts.length) parts.push(" · ");
      parts.push(`forks (${forks.length}): `);
      forks.forEach((f, i) => {
        if (i) parts.push(", ");
        parts.push(runLink(f), ` at step ${f.step} (${f.status})`);
      });
    }
    element.replaceChildren(...parts);
  }

  // Loads each ancestor's rank-0 loss over the steps the younger run took from it: the parent's
  // up to the fork's step, the grandparent's up to the parent's, and so on.
  async function load(lineage) {
    show(lineage);
    const ancestors = lineage?.ancestors || [];
    segments = await Promise.all(ancestors.map(async (a, i) => {
      const from = i + 1 < ancestors.length ? ancestors[i + 1].step + 1 : 0;
      const rows = await getJson(`/api/runs/${encodeURIComponent(a.id)}/metrics?keys=loss&from=${from}&to=${a.step}&points=${ancestorPoints}`);
      const rank0 = rows.series.loss.find((r) => r.rank === 0) || { step: [], time: [], value: [] };
      return { name: a.name, steps: rank0.step, times: rank0.time, ys: rank0.value };
    }));
    return segments.length > 0;
  }

  return { element, load, segments: () => segments };
}
