// The run's plan beside what it measures: the step time and memory `kiln plan` gives its
// layout on its device (recorded when it started: planned_step_s, planned_memory_bytes) and
// rank 0's latest step time (the tokens a step trains over its tokens/s) and memory in use.
// A run whose recent steps are more than 20% slower than planned is marked: the median of rank
// 0's last persistentSteps logged steps, so one slow step (a run starting beside it) is not.
import { el, format } from "/api.js";

export const slowerThanPlanned = 1.2;  // store/run_figures.h: kSlowerThanPlanned
export const persistentSteps = 5;      // store/run_figures.h: kPersistentSteps

const msPerStep = (s) => (s > 0 ? `${(s * 1e3).toFixed(1)} ms/step` : "— ms/step");

// The median step time of the last persistentSteps rates (tokens/s), or null with fewer or
// with one that measured nothing.
function recentStep(tokensPerStep, rates) {
  const recent = (rates || []).slice(-persistentSteps);
  if (!(tokensPerStep > 0) || recent.length < persistentSteps || recent.some((r) => !(r > 0))) return null;
  const steps = recent.map((r) => tokensPerStep / r).sort((a, b) => a - b);
  return steps[Math.floor(persistentSteps / 2)];
}

// null for a run without a plan. latest: rank 0's latest {tokens_per_s, mem_used} and its
// tokens/s at its logged steps, oldest first (rates), or null.
export function planFacts(run, tokensPerStep, latest) {
  const planned = run.planned_step_s > 0 ? run.planned_step_s : null;
  if (planned == null && run.planned_memory_bytes == null) return null;
  const measured = latest?.tokens_per_s > 0 && tokensPerStep > 0 ? tokensPerStep / latest.tokens_per_s : null;
  const recent = recentStep(tokensPerStep, latest?.rates);
  return {
    step: `planned ${msPerStep(planned)}`,
    measured: `measured ${msPerStep(measured)}`,
    slower: planned != null && recent != null && recent > slowerThanPlanned * planned,
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
