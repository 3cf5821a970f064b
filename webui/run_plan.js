// The run's plan beside what it measures: the step time and memory `kiln plan` gives its
// layout on its device (recorded when it started: planned_step_s, planned_memory_bytes) and
// rank 0's latest step time (the tokens a step trains over its tokens/s) and memory in use.
// A step more than 20% slower than planned is marked.
import { el, format } from "/api.js";

export const slowerThanPlanned = 1.2;  // store/run_figures.h: kSlowerThanPlanned

const msPerStep = (s) => (s > 0 ? `${(s * 1e3).toFixed(1)} ms/step` : "— ms/step");

// null for a run without a plan. latest: rank 0's latest {tokens_per_s, mem_used}, or null.
export function planFacts(run, tokensPerStep, latest) {
  const planned = run.planned_step_s > 0 ? run.planned_step_s : null;
  if (planned == null && run.planned_memory_bytes == null) return null;
  const measured = latest?.tokens_per_s > 0 && tokensPerStep > 0 ? tokensPerStep / latest.tokens_per_s : null;
  return {
    step: `planned ${msPerStep(planned)}`,
    measured: `measured ${msPerStep(measured)}`,
    slower: planned != null && measured != null && measured > slowerThanPlanned * planned,
    memory: `planned memory ${format.bytes(run.planned_memory_bytes)} · measured ${format.bytes(latest?.mem_used)}`,
  };
}

// The facts' two spans: "planned X ms/step · measured Y ms/step" (the measured step marked
// "slower than planned" when it is) and "planned memory A · measured B"; none without a plan.
export function planSpans(facts) {
  if (!facts) return [];
  const measured = facts.slower
    ? el("span", { id: "run-measured-step", class: "slower-than-planned", title: "slower than planned" }, facts.measured)
    : el("span", { id: "run-measured-step" }, facts.measured);
  return [el("span", { id: "run-plan-step" }, `${facts.step} · `, measured),
    el("span", { id: "run-plan-memory" }, facts.memory)];
}
