// Reading and writing single rows: the one place that knows each table's column order.
// The writer and the queries both go through here, so a column added in a migration is
// added here once.
#pragma once

#include <cstdint>
#include <string>

#include "store/database.h"
#include "store/metric_fields.h"
#include "store/types.h"

namespace kiln::store {

inline constexpr const char* kEventColumns = "id, time, step, kind, message";
inline constexpr const char* kCheckpointColumns = "step, path, bytes, layout, time, seconds";
inline constexpr const char* kCommandColumns =
    "id, run_id, created_at, action, argument, status, applied_step, applied_at, reason";
inline constexpr const char* kSystemColumns =
    "rank, time, gpu_util, gpu_mem_used, gpu_power_w, gpu_temp_c, cpu_percent, rss_bytes, "
    "host_mem_used, host_mem_total";
inline constexpr const char* kSampleColumns = "step, slot, time, prompt, text, temperature";
inline constexpr const char* kExpertLoadColumns = "step, layer, tokens, dropped, aux_loss, router_entropy";

// Inserts replace a row with the same key: a run resumed from a checkpoint logs its steps
// again, and the newer measurement is the one to keep. insert_metric writes the row alone:
// whoever inserts metric rows also hands them to a BlockUpdate (metric_blocks.h) in the same
// transaction, as the writer does, or downsampled series will not see them.
void insert_metric(Database& db, int64_t run_id, const MetricRow& row);
void insert_valid(Database& db, int64_t run_id, const ValidRow& row);
void insert_system(Database& db, int64_t run_id, const SystemRow& row);
int64_t insert_event(Database& db, int64_t run_id, const Event& event);
void insert_checkpoint(Database& db, int64_t run_id, const Checkpoint& checkpoint);
void insert_sample(Database& db, int64_t run_id, const Sample& sample);
// Also writes the imbalance column (expert_load.h) and a NULL `dropped` when none was.
void insert_expert_load(Database& db, int64_t run_id, const ExpertLoad& load);

// Read a row whose selected columns start at `first` in the order of the lists above (the
// metrics' columns: metric_column_list(), store/metric_fields.h).
MetricRow read_metric(const Statement& st, int first = 0);
SystemRow read_system(const Statement& st, int first = 0);
Event read_event(const Statement& st, int first = 0);
Checkpoint read_checkpoint(const Statement& st, int first = 0);
Command read_command(const Statement& st, int first = 0);
Sample read_sample(const Statement& st, int first = 0);
ExpertLoad read_expert_load(const Statement& st, int first = 0);

}  // namespace kiln::store
