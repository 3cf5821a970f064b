// The metric list (store/metric_fields.h) as the server serves it (GET /api/metric-fields):
// which metrics each chart, choice and column shows, so a metric added to the list appears
// here without an edit.
import { getJson } from "/api.js";

const fields = await getJson("/api/metric-fields");

// The fields a view shows ("run_chart", "compare_grid", "compare_choice", "time_split",
// "time_within"), in the list's order.
export const fieldsIn = (...views) => fields.filter((f) => f.views.some((v) => views.includes(v)));
export const namesIn = (...views) => fieldsIn(...views).map((f) => f.name);
// Which end of a per-rank field's spread across ranks is the slow rank: "high" (times,
// memory) or "low" (throughputs); null for a field the same on every rank.
export const slowEnd = (name) => fields.find((f) => f.name === name)?.slow ?? null;
