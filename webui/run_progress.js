// How far a run has come: its logged steps against the steps its config plans, how long it
// has run, and when it should end at its recent pace (wall clock over the last logged steps,
// so validation, checkpoints and sampling count as they will in the steps to come).
import { format } from "/api.js";

const paceWindow = 20;  // logged steps the pace is measured over

// Seconds the run has run: to its end, to its last heartbeat if lost, to now while live.
export function elapsedSeconds(run, now) {
  if (run.started_at == null) return null;
  const end = run.ended_at ?? (run.status === "lost" ? run.heartbeat_at : now);
  return Math.max(0, end - run.started_at);
}

// Steps per second over the last logged steps of one rank; null until two are apart in time.
export function stepsPerSecond(steps, times) {
  const n = steps.length;
  if (n < 2) return null;
  const first = Math.max(0, n - 1 - paceWindow);
  const seconds = times[n - 1] - times[first];
  return seconds > 0 ? (steps[n - 1] - steps[first]) / seconds : null;
}

// The three facts as the run page shows them. line: rank 0's logged steps and their times.
export function progressFacts(run, planned, line, now) {
  const last = run.last_step;
  const progress = planned ? `step ${last ?? 0} of ${planned} planned (${((100 * (last ?? 0)) / planned).toFixed(0)}%)`
    : `step ${last ?? "—"}`;
  let eta = "ETA —";
  if (run.status !== "running") {
    eta = `ETA — (${run.status})`;
  } else if (planned) {
    const rate = stepsPerSecond(line.steps, line.times);
    if (rate) eta = `ETA ${format.duration(Math.max(0, planned - (last ?? 0)) / rate)}`;
  }
  return { progress, elapsed: `elapsed ${format.duration(elapsedSeconds(run, now))}`, eta };
}
