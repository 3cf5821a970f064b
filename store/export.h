// Exporting a run's raw rows, every one, no sampling (`kiln runs export`).
#pragma once

#include <cstdint>
#include <ostream>

#include "store/database.h"

namespace kiln::store {

// The CSV header; the first columns are the ones the issue fixes, the rest follow.
inline constexpr const char* kMetricsCsvHeader =
    "run,step,rank,time,tokens,loss,lr,grad_norm,tokens_per_s,tflops,mfu,mem_used,mem_peak,"
    "fwd_ms,bwd_ms,opt_ms,comm_ms,data_ms,loss_scale,skipped_steps";

// Every metric row as CSV: the header, then one line per (step, rank). `run` is the run's
// name; an absent value is an empty field; numbers round-trip exactly.
void write_metrics_csv(Database& db, int64_t run_id, std::ostream& out);

// The whole run as one JSON object: {"run": {...}, "metrics": [...], "valid": [...],
// "system": [...], "events": [...], "checkpoints": [...], "commands": [...]}. Rows stream
// out one at a time; an absent or non-finite number is null.
void write_run_json(Database& db, int64_t run_id, std::ostream& out);

}  // namespace kiln::store
