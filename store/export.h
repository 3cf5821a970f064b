// Exporting a run's raw rows, every one the store holds, no sampling (`kiln runs export`). A
// run of more than 8 ranks keeps the rows of ranks other than 0 for its newest 1,000 steps only
// (metric_spread.h): before them its export has rank 0's rows alone.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The CSV header: "run", then the metric fields in the list's order (store/metric_fields.h).
const std::string& metrics_csv_header();

// Every metric row as CSV: the header, then one line per (step, rank). `run` is the run's
// name; an absent value is an empty field; numbers round-trip exactly.
void write_metrics_csv(Database& db, int64_t run_id, std::ostream& out);

// One metric row as its CSV line (with the line break), in the header's columns; `run` is
// the run's name as stored (quoted here if it needs to be).
void append_metrics_csv_line(std::string& out, const std::string& run, const MetricRow& row);

// The same CSV a page at a time, for a reader that lets go of the store between pages: the
// server streams an export to a client that may read slowly, and must not hold a connection
// or a read snapshot meanwhile. Each page is read in its own snapshot, so rows committed
// during the export after the page reached show up; none is written twice.
class MetricsCsvPages {
 public:
  // An unknown run is an error.
  MetricsCsvPages(Database& db, int64_t run_id);
  // The next page: the header first, then up to `rows` lines each call; "" once every row
  // is out.
  std::string next(Database& db, size_t rows);

 private:
  int64_t run_id_;
  std::string run_;
  bool header_written_ = false;
  // The (step, rank) of the last row written.
  int64_t step_ = std::numeric_limits<int64_t>::min();
  int64_t rank_ = std::numeric_limits<int64_t>::min();
};

// The expert loads' CSV header: one line per expert per MoE layer per logged step (the tidy
// form a data frame pivots into a heatmap), the layer's figures repeated on each.
inline constexpr const char* kExpertsCsvHeader =
    "run,step,layer,expert,tokens,dropped,aux_loss,router_entropy,imbalance";

// Every expert load as CSV, in step, layer and expert order; dropped is 0 when none were.
void write_experts_csv(Database& db, int64_t run_id, std::ostream& out);

// Every metric row as a JSON object a line (the metric fields' names as keys, an absent
// value null), then each validation loss as {"step", "time", "valid_loss"}: the shape W&B's
// history takes, which `kiln runs import --format jsonl` reads back.
void write_metrics_jsonl(Database& db, int64_t run_id, std::ostream& out);

// The whole run as one JSON object: {"run": {...}, "metrics": [...], "valid": [...],
// "samples": [...], "experts": [...], "system": [...], "events": [...], "checkpoints": [...],
// "commands": [...]}. Rows stream out one at a time; an absent or non-finite number is null.
void write_run_json(Database& db, int64_t run_id, std::ostream& out);

}  // namespace kiln::store
