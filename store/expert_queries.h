// Reading the routing of a run's mixture-of-experts layers (RunWriter::log_expert_loads):
// a layer's loads over a step range for the dashboard's heatmap, each layer's latest for the
// terminal UI and `kiln runs show`, and what is new since a step for the live stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The layers that have loads in the run, ascending (at most kMaxExpertLayers: the writer
// refuses other indices).
std::vector<int> expert_layers(Database& db, int64_t run_id);

// The highest step with loads, if any.
std::optional<int64_t> last_expert_step(Database& db, int64_t run_id);

struct ExpertRange {
  std::optional<int> layer;  // every layer when absent
  int64_t from = std::numeric_limits<int64_t>::min();  // steps, both ends included
  int64_t to = std::numeric_limits<int64_t>::max();
  // Per layer. A range that holds more rows comes downsampled to this many: for each of
  // max_steps steps spaced evenly from the range's first row to its last, the first row at
  // or after it (after the row taken before), so both ends are in and none comes twice.
  // Each is one seek of the key, so the cost is max_steps seeks whatever the range holds.
  size_t max_steps = 1000;
};
// Ordered by layer, then step.
std::vector<ExpertLoad> list_expert_loads(Database& db, int64_t run_id, const ExpertRange& range);

// Each layer's latest load, by layer.
std::vector<ExpertLoad> latest_expert_loads(Database& db, int64_t run_id);

// The loads of whole steps after `after_step`, oldest first (by step, then layer): the
// newest steps whose rows fit in max_rows (at least one step, all its layers, when
// max_rows >= kMaxExpertLayers).
std::vector<ExpertLoad> expert_loads_after(Database& db, int64_t run_id, int64_t after_step, size_t max_rows);

// Every load of the run in step, then layer order, one at a time (the export).
void for_each_expert_load(Database& db, int64_t run_id, const std::function<void(const ExpertLoad&)>& fn);

}  // namespace kiln::store
