#include "store/write_queue.h"

#include <algorithm>
#include <iterator>

namespace kiln::store {

void Dropped::merge(const Dropped& other) {
  if (other.metric_rows > 0) {
    first_step = metric_rows > 0 ? std::min(first_step, other.first_step) : other.first_step;
    last_step = metric_rows > 0 ? std::max(last_step, other.last_step) : other.last_step;
  }
  metric_rows += other.metric_rows;
  system_rows += other.system_rows;
}

std::string Dropped::describe() const {
  std::string text = "dropped ";
  if (metric_rows > 0)
    text += std::to_string(metric_rows) + " metric rows (steps " + std::to_string(first_step) +
            " to " + std::to_string(last_step) + ")";
  if (metric_rows > 0 && system_rows > 0) text += " and ";
  if (system_rows > 0) text += std::to_string(system_rows) + " system rows";
  return text + ": the store could not keep up";
}

size_t WriteQueue::rows_of(const WriteItem& item) {
  if (const auto* m = std::get_if<MetricBatch>(&item)) return m->rows.size();
  if (const auto* s = std::get_if<SystemBatch>(&item)) return s->rows.size();
  return 0;
}

void WriteQueue::push(WriteItem item) {
  rows_ += rows_of(item);
  items_.push_back(std::move(item));
  thin();
}

Batch WriteQueue::take() {
  Batch batch{std::move(items_), dropped_};
  items_.clear();
  rows_ = 0;
  dropped_ = {};
  return batch;
}

void WriteQueue::put_back(Batch batch) {
  for (auto& item : items_) batch.items.push_back(std::move(item));
  items_ = std::move(batch.items);
  rows_ = 0;
  for (const auto& item : items_) rows_ += rows_of(item);
  dropped_.merge(batch.dropped);
  thin();
}

void WriteQueue::thin() {
  // Thin one kind at a time, the kind that holds more rows first.
  for (int round = 0; rows_ > capacity_ && round < 64; ++round) {
    size_t metric = 0, system = 0, metric_batches = 0, system_batches = 0;
    for (const auto& item : items_) {
      if (const auto* m = std::get_if<MetricBatch>(&item)) metric += m->rows.size(), ++metric_batches;
      if (const auto* s = std::get_if<SystemBatch>(&item)) system += s->rows.size(), ++system_batches;
    }
    const bool thin_metrics = metric_batches > 1 && (metric >= system || system_batches < 2);
    if (!thin_metrics && system_batches < 2) return;  // one batch of each: nothing to thin
    const size_t batches = thin_metrics ? metric_batches : system_batches;

    // Positions 1, 3, 5, ... among this kind's batches go, the newest never; of two, the
    // older goes.
    std::deque<WriteItem> kept;
    size_t position = 0;
    for (auto& item : items_) {
      const bool of_kind = thin_metrics ? std::holds_alternative<MetricBatch>(item)
                                        : std::holds_alternative<SystemBatch>(item);
      if (!of_kind) {
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
      Dropped d;
      if (auto* m = std::get_if<MetricBatch>(&item)) {
        if (m->rows.empty()) continue;
        const auto [lo, hi] = std::minmax_element(
            m->rows.begin(), m->rows.end(),
            [](const MetricRow& a, const MetricRow& b) { return a.step < b.step; });
        d.metric_rows = static_cast<int64_t>(m->rows.size());
        d.first_step = lo->step;
        d.last_step = hi->step;
      } else {
        d.system_rows = static_cast<int64_t>(std::get<SystemBatch>(item).rows.size());
      }
      rows_ -= static_cast<size_t>(d.metric_rows + d.system_rows);
      dropped_total_ += d.metric_rows + d.system_rows;
      dropped_.merge(d);
    }
    items_ = std::move(kept);
  }
}

}  // namespace kiln::store
