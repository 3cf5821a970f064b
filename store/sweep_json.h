// Sweeps as JSON, the one shape `kiln sweep show --json` and the dashboard's API hand out
// (docs/sweeps.md). Absent numbers are null, as in json_rows.h.
#pragma once

#include <nlohmann/json.hpp>

#include "store/sweep_queries.h"

namespace kiln::store {

// Every field, the spec parsed ({"id", "name", "created_at", "heartbeat_at", "ended_at",
// "status" (live, ended or interrupted), "points", "launched", "completed", "running", "failed", "spec", "command_line",
// "workdir", "host"}).
nlohmann::json to_json(const SweepSummary& sweep);
// {"point", "params" (parsed), "run_id", "run_name" (null until launched), "status"
// ("pending" until launched, then the run's effective status), "last_step", "steps" (the
// steps its run was to train), "final_loss",
// "best_loss", "final_valid_loss", "best_valid_loss", "tokens_per_s"}.
nlohmann::json to_json(const SweepPointRow& point);
// {"sweep", "parameters", "points", "best": {"point", "metric", "value", "partial", "last_step",
// "steps", "label"} or null}: best_point's choice, and best_label's name for it.
nlohmann::json to_json(const SweepDetails& details);

}  // namespace kiln::store
