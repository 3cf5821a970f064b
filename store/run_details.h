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
  // The latest logged step's rows: every rank's, or of a wide step (metric_spread.h) rank 0's
  // alone, the step's spread standing for the others (a 4,096-rank run's page was sent 4,096
  // rows, 1.9 MB, that it did not draw).
  std::vector<MetricRow> latest;
  int64_t latest_ranks = 0;  // ranks that logged the latest step
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

// Every rank's row of the run's latest logged step, by rank: the per-rank gauges of the
// dashboard's Prometheus scrape.
std::vector<MetricRow> latest_rows_of_every_rank(Database& db, int64_t run_id);

}  // namespace kiln::store
