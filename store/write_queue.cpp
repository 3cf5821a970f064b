#include "store/write_queue.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace kiln::store {
namespace {

template <typename T>
constexpr size_t kind_of = WriteItem(T{}).index();

constexpr std::array<size_t, 5> kRecordKinds = {kind_of<ValidRow>, kind_of<SampleBatch>, kind_of<Event>,
                                                kind_of<Checkpoint>, kind_of<StatusChange>};

bool is_record(const WriteItem& item) {
  return std::find(kRecordKinds.begin(), kRecordKinds.end(), item.index()) != kRecordKinds.end();
}

size_t experts_of(const WriteItem& item) {
  size_t n = 0;
  if (const auto* e = std::get_if<ExpertBatch>(&item))
    for (const auto& load : e->loads) n += load.tokens.size();
  return n;
}

size_t rows_of(const WriteItem& item) {
  if (const auto* m = std::get_if<MetricBatch>(&item)) return m->rows.size();
  if (const auto* s = std::get_if<SystemBatch>(&item)) return s->rows.size();
  return 0;
}

void add_part(std::string& text, int64_t count, const char* what) {
  if (count <= 0) return;
  text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + what;
}

}  // namespace

Dropped dropped_of(const WriteItem& item) {
  Dropped d;
  if (const auto* m = std::get_if<MetricBatch>(&item); m && !m->rows.empty()) {
    const auto [lo, hi] = std::minmax_element(m->rows.begin(), m->rows.end(),
                                              [](const MetricRow& a, const MetricRow& b) { return a.step < b.step; });
    d.metric_rows = static_cast<int64_t>(m->rows.size());
    d.first_step = lo->step;
    d.last_step = hi->step;
  } else if (const auto* s = std::get_if<SystemBatch>(&item)) {
    d.system_rows = static_cast<int64_t>(s->rows.size());
  } else if (std::holds_alternative<ValidRow>(item)) {
    d.valid_rows = 1;
  } else if (const auto* batch = std::get_if<SampleBatch>(&item)) {
    d.samples = static_cast<int64_t>(batch->samples.size());
  } else if (std::holds_alternative<Event>(item)) {
    d.events = 1;
  } else if (std::holds_alternative<Checkpoint>(item)) {
    d.checkpoints = 1;
  } else if (std::holds_alternative<StatusChange>(item)) {
    d.status_changes = 1;
  } else if (std::holds_alternative<ExpertBatch>(item)) {
    d.expert_steps = 1;
  }
  return d;
}

void Dropped::merge(const Dropped& other) {
  if (other.metric_rows > 0) {
    first_step = metric_rows > 0 ? std::min(first_step, other.first_step) : other.first_step;
    last_step = metric_rows > 0 ? std::max(last_step, other.last_step) : other.last_step;
  }
  metric_rows += other.metric_rows;
  system_rows += other.system_rows;
  valid_rows += other.valid_rows;
  samples += other.samples;
  events += other.events;
  checkpoints += other.checkpoints;
  status_changes += other.status_changes;
  expert_steps += other.expert_steps;
}

std::string Dropped::describe() const {
  std::string parts;
  if (metric_rows > 0)
    parts = std::to_string(metric_rows) + " metric rows (steps " + std::to_string(first_step) + " to " +
            std::to_string(last_step) + ")";
  add_part(parts, system_rows, "system rows");
  add_part(parts, valid_rows, "validation rows");
  add_part(parts, samples, "samples");
  add_part(parts, events, "events");
  add_part(parts, checkpoints, "checkpoint records");
  add_part(parts, status_changes, "status changes");
  add_part(parts, expert_steps, "steps of expert loads");
  const size_t last_comma = parts.rfind(", ");
  if (last_comma != std::string::npos) parts.replace(last_comma, 2, " and ");
  return "dropped " + parts + ": the store could not keep up";
}

void WriteQueue::count(const WriteItem& item, int sign) {
  rows_ += static_cast<size_t>(sign) * rows_of(item);
  if (is_record(item)) records_ += static_cast<size_t>(sign);
  experts_ += static_cast<size_t>(sign) * experts_of(item);
}

void WriteQueue::push(WriteItem item) {
  if (std::holds_alternative<Heartbeat>(item)) {
    if (heartbeat_queued_) return;  // the commit that takes the first one is the sign of life
    heartbeat_queued_ = true;
  }
  count(item, 1);
  items_.push_back(std::move(item));
  thin();
}

Batch WriteQueue::take() {
  Batch batch{std::move(items_), dropped_};
  items_.clear();
  rows_ = 0;
  records_ = 0;
  experts_ = 0;
  heartbeat_queued_ = false;
  dropped_ = {};
  return batch;
}

void WriteQueue::put_back(Batch batch) {
  for (auto& item : items_) batch.items.push_back(std::move(item));
  items_ = std::move(batch.items);
  rows_ = 0;
  records_ = 0;
  experts_ = 0;
  heartbeat_queued_ = false;
  for (const auto& item : items_) {
    count(item, 1);
    heartbeat_queued_ = heartbeat_queued_ || std::holds_alternative<Heartbeat>(item);
  }
  dropped_.merge(batch.dropped);
  thin();
}

void WriteQueue::thin() {
  // Rows: one kind at a time, the kind that holds more rows first.
  for (int round = 0; rows_ > capacity_ && round < 64; ++round) {
    size_t metric = 0, system = 0, metric_batches = 0, system_batches = 0;
    for (const auto& item : items_) {
      if (const auto* m = std::get_if<MetricBatch>(&item)) metric += m->rows.size(), ++metric_batches;
      if (const auto* s = std::get_if<SystemBatch>(&item)) system += s->rows.size(), ++system_batches;
    }
    const bool thin_metrics = metric_batches > 1 && (metric >= system || system_batches < 2);
    if (!thin_metrics && system_batches < 2) break;  // one batch of each: nothing to thin
    thin_kind(thin_metrics ? kind_of<MetricBatch> : kind_of<SystemBatch>);
  }
  // Expert loads: whole steps, while more than one waits.
  for (int round = 0; experts_ > capacity_experts_ && round < 64; ++round) {
    const auto steps = std::count_if(items_.begin(), items_.end(),
                                     [](const WriteItem& item) { return std::holds_alternative<ExpertBatch>(item); });
    if (steps < 2) break;
    thin_kind(kind_of<ExpertBatch>);
  }
  // Records: the kind with the most waiting first.
  for (int round = 0; records_ > capacity_records_ && round < 64; ++round) {
    std::array<size_t, kRecordKinds.size()> waiting{};
    for (const auto& item : items_)
      for (size_t k = 0; k < kRecordKinds.size(); ++k) waiting[k] += item.index() == kRecordKinds[k];
    const size_t most = static_cast<size_t>(std::max_element(waiting.begin(), waiting.end()) - waiting.begin());
    if (waiting[most] < 2) break;
    thin_kind(kRecordKinds[most]);
  }
}

void WriteQueue::thin_kind(size_t kind) {
  size_t batches = 0;
  for (const auto& item : items_) batches += item.index() == kind;
  // Positions 1, 3, 5, ... among this kind's items go, the newest never; of two, the older
  // goes.
  std::deque<WriteItem> kept;
  size_t position = 0;
  for (auto& item : items_) {
    if (item.index() != kind) {
      kept.push_back(std::move(item));
      continue;
    }
    const bool last = position == batches - 1;
    const bool drop = !last && (batches == 2 ? position == 0 : position % 2 == 1);
    ++position;
    if (!drop) {
      kept.push_back(std::move(item));
      continue;
    }
    const Dropped d = dropped_of(item);
    count(item, -1);
    dropped_total_ += d.metric_rows + d.system_rows;
    dropped_.merge(d);
  }
  items_ = std::move(kept);
}

}  // namespace kiln::store
