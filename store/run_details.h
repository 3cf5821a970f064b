// One run's page, everything `kiln runs show`, the dashboard and the terminal UI show of it at
// once: its record, latest rows, events, checkpoints, commands, rewinds and lineage. It gathers from the
// other readers (run_queries, commands, lineage, samples, experts), which never include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "store/database.h"
#include "store/run_queries.h"
#include "store/types.h"

namespace kiln::store {

struct RunDetails {
  RunRecord run;
  std::vector<MetricRow> latest;  // the latest logged step, one row per rank that logged it
  std::optional<ValidRow> latest_valid;
  std::vector<Sample> latest_samples;  // the texts generated at the latest validation step, by slot
  std::vector<ExpertLoad> latest_experts;  // each MoE layer's latest load, by layer
  std::vector<Event> events;      // the newest max_events, oldest first
  std::vector<Checkpoint> checkpoints;
  std::vector<Command> commands;
  std::vector<Rewind> rewinds;  // oldest first, each with its abandoned losses (rewind_rows.h)
  Lineage lineage;  // its parents and forks (store/lineage.h)
};
RunDetails run_details(Database& db, int64_t run_id, size_t max_events = 100,
                       double stale_after_s = kDefaultStaleAfterS);

}  // namespace kiln::store
