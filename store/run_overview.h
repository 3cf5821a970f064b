// One run as the runs lists show it (`kiln runs list`, the dashboard's runs table): its record
// and what its latest logged step measured.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

struct RunOverview {
  RunRecord run;
  std::optional<int64_t> planned_steps;  // train.steps of its config
  // Means over the ranks at the latest logged step.
  double loss = kNoValue;
  double tokens_per_s = kNoValue;
  double mfu = kNoValue;
  double duration_s = kNoValue;
};

RunOverview run_overview(Database& db, RunRecord run, double now_s);

// The record's JSON (json_rows.h) with steps, loss, tokens_per_s, mfu and duration_s added.
nlohmann::json to_json(const RunOverview& overview);

}  // namespace kiln::store
