// The writer's bounded queue, and what it does when the disk cannot keep up.
//
// Metric and system rows are counted against a capacity. When a push would pass it, the
// queue thins the oldest waiting batches of that kind (it drops every second one, never the
// newest), so a long stall leaves the curve sampled more coarsely instead of cut off, the
// queue's memory stays bounded and the latest measurements are always kept. Every row
// dropped is counted; the writer records the count as a `dropped` event in its next commit.
// Validation rows, samples, events, checkpoint records and status changes have a capacity of
// their own (a run whose loss is NaN at every step logs an event at every step): past it they
// thin the same way, the kind with the most waiting first, the newest of each kind always kept
// (so a run's final status is never lost). A step's expert loads (up to kMaxExpertLayers x
// kMaxExpertsPerLayer counts) are counted in experts against a capacity of their own and thin
// the same way, whole steps at a time. At most one heartbeat waits: any commit is one.
// Not thread-safe: the RunWriter holds its mutex around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "store/types.h"

namespace kiln::store {

struct MetricBatch {
  std::vector<MetricRow> rows;
  // The seconds the run has spent in steps that survive, as of these rows (runs.step_seconds,
  // for goodput); nullopt: not measured by this writer.
  std::optional<double> step_seconds;
};
struct SystemBatch {
  std::vector<SystemRow> rows;
};
// One validation step's samples, one per prompt: committed together, so a reader following
// the run by step (the live stream) sees a step's samples all or none.
struct SampleBatch {
  std::vector<Sample> samples;
};
// One logged step's expert loads, every MoE layer's (RunWriter::log_expert_loads).
struct ExpertBatch {
  std::vector<ExpertLoad> loads;
};
struct StatusChange {
  RunStatus status = RunStatus::Running;
  std::string error;  // kept in runs.error for a failed run
  double time = 0;
};
struct Heartbeat {};

using WriteItem = std::variant<MetricBatch, SystemBatch, ValidRow, SampleBatch, Event, Checkpoint,
                               StatusChange, Heartbeat, ExpertBatch>;

// What thinning removed since the last commit.
struct Dropped {
  int64_t metric_rows = 0;
  int64_t system_rows = 0;
  int64_t first_step = 0;  // step range of the dropped metric rows
  int64_t last_step = 0;
  int64_t valid_rows = 0;
  int64_t samples = 0;
  int64_t events = 0;
  int64_t checkpoints = 0;
  int64_t status_changes = 0;
  int64_t expert_steps = 0;  // ExpertBatch items: a logged step's loads, every layer's

  bool any() const {
    return metric_rows > 0 || system_rows > 0 || valid_rows > 0 || samples > 0 || events > 0 ||
           checkpoints > 0 || status_changes > 0 || expert_steps > 0;
  }
  void merge(const Dropped& other);
  std::string describe() const;  // the `dropped` event's message
};

// What dropping this one item loses.
Dropped dropped_of(const WriteItem& item);

// What the writer thread takes to commit as one transaction.
struct Batch {
  std::deque<WriteItem> items;
  Dropped dropped;
};

class WriteQueue {
 public:
  // capacity_experts: per-expert counts waiting (one per expert per layer per step) before
  // expert loads thin; at least one whole step of the largest (512 x 1024) always stays.
  explicit WriteQueue(size_t capacity_rows, size_t capacity_records = 4096,
                      size_t capacity_experts = size_t{1} << 20)
      : capacity_(capacity_rows), capacity_records_(capacity_records), capacity_experts_(capacity_experts) {}

  void push(WriteItem item);
  // Everything waiting, and the drops not yet recorded; the queue is left empty.
  Batch take();
  // A batch whose commit failed goes back in front of anything pushed since.
  void put_back(Batch batch);

  bool empty() const { return items_.empty() && !dropped_.any(); }
  size_t rows() const { return rows_; }
  // Validation rows, samples, events, checkpoint records and status changes waiting.
  size_t records() const { return records_; }
  size_t experts() const { return experts_; }
  int64_t dropped_total() const { return dropped_total_; }

 private:
  void count(const WriteItem& item, int sign);
  void thin();
  // Drops every second item of the variant alternative `kind`, oldest first, never the newest.
  void thin_kind(size_t kind);

  size_t capacity_;
  size_t capacity_records_;
  size_t capacity_experts_;
  std::deque<WriteItem> items_;
  size_t rows_ = 0;     // metric and system rows in items_
  size_t records_ = 0;  // the other items but heartbeats and expert loads
  size_t experts_ = 0;  // per-expert counts in ExpertBatch items
  bool heartbeat_queued_ = false;
  Dropped dropped_;
  int64_t dropped_total_ = 0;  // metric and system rows ever dropped
};

}  // namespace kiln::store
