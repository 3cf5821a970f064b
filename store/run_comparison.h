// Comparing runs (`kiln runs compare`, the dashboard's compare page): how their configs
// differ and the summary figures of each.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
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

// A target loss that is not finite is an error.
RunComparison compare_runs(Database& db, const std::vector<int64_t>& ids,
                           std::optional<double> target_loss = std::nullopt);

// {"runs": [{id, name}], "config_diff": [{key, values}], "summary": [...]}.
nlohmann::json to_json(const RunComparison& comparison);

}  // namespace kiln::store
