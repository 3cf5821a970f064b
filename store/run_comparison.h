// Comparing runs (`kiln runs compare`, the dashboard's compare page): how their configs
// differ and the summary figures of each.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "store/config_diff.h"
#include "store/database.h"
#include "store/metric_queries.h"
#include "store/types.h"

namespace kiln::store {

struct RunComparison {
  std::vector<RunRecord> runs;
  std::vector<ConfigDifference> diff;
  std::vector<RunSummary> summaries;
  std::optional<double> target_loss;
};

// The runs as typed (ids, names, prefixes), resolved to distinct ids: fewer than two, an
// unknown one, or the same run twice is an error (comparing a run with itself is a typo).
std::vector<int64_t> resolve_distinct_runs(Database& db, const std::vector<std::string>& typed);
// That check alone, for runs resolved elsewhere (the dashboard's, across stores): `ids[i]` is
// the run typed[i] names, as the caller shows ids; an equal pair is the same run.
void check_distinct_runs(const std::vector<std::string>& typed, const std::vector<std::string>& ids);

// A target loss that is not finite is an error.
RunComparison compare_runs(Database& db, const std::vector<int64_t>& ids,
                           std::optional<double> target_loss = std::nullopt);

// One run to compare and the store it is in: the dashboard compares runs of several stores
// (docs/dashboard.md#several-stores). The runs' order is the comparison's.
struct ComparedRun {
  Database* db = nullptr;
  int64_t id = 0;
};
RunComparison compare_runs(std::span<const ComparedRun> runs, std::optional<double> target_loss = std::nullopt);

// {"runs": [{id, name}], "config_diff": [{key, values}], "summary": [...]}.
nlohmann::json to_json(const RunComparison& comparison);

}  // namespace kiln::store
