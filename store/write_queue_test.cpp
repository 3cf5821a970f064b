#include "store/write_queue.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln::store {
namespace {

MetricBatch batch(int64_t step, int rows = 1) {
  MetricBatch b;
  for (int r = 0; r < rows; ++r) {
    MetricRow m;
    m.step = step;
    m.rank = r;
    b.rows.push_back(m);
  }
  return b;
}

std::vector<int64_t> steps_in(const std::deque<WriteItem>& items) {
  std::vector<int64_t> steps;
  for (const auto& item : items)
    if (const auto* m = std::get_if<MetricBatch>(&item)) steps.push_back(m->rows.at(0).step);
  return steps;
}

TEST(WriteQueueTest, BelowCapacityKeepsEverythingInOrder) {
  WriteQueue q(100);
  for (int64_t s = 0; s < 10; ++s) q.push(batch(s, 4));
  EXPECT_EQ(q.rows(), 40u);
  Batch b = q.take();
  EXPECT_EQ(steps_in(b.items), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_FALSE(b.dropped.any());
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.rows(), 0u);
}

TEST(WriteQueueTest, OverflowThinsEverySecondOldBatchAndKeepsTheNewest) {
  WriteQueue q(10);
  for (int64_t s = 0; s < 11; ++s) q.push(batch(s));
  // The 11th row passed the capacity: positions 1, 3, 5, 7, 9 went; 10 (the newest) stays.
  Batch b = q.take();
  EXPECT_EQ(steps_in(b.items), (std::vector<int64_t>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(b.dropped.metric_rows, 5);
  EXPECT_EQ(b.dropped.first_step, 1);
  EXPECT_EQ(b.dropped.last_step, 9);
  EXPECT_EQ(b.dropped.describe(),
            "dropped 5 metric rows (steps 1 to 9): the store could not keep up");
  EXPECT_EQ(q.dropped_total(), 5);
}

TEST(WriteQueueTest, ALongStallStaysBoundedSampledAndCounted) {
  WriteQueue q(64);
  int64_t pushed = 0;
  for (int64_t s = 0; s < 10000; ++s) {
    q.push(batch(s, 2));
    pushed += 2;
    ASSERT_LE(q.rows(), 64u);
    if (s % 1000 == 0) q.push(Event{0, 0, s, "note", "kept"});
  }
  const int64_t dropped = q.dropped_total();
  Batch b = q.take();
  const auto steps = steps_in(b.items);
  EXPECT_EQ(static_cast<int64_t>(steps.size()) * 2 + dropped, pushed);
  EXPECT_EQ(b.dropped.metric_rows, dropped);
  EXPECT_EQ(steps.front(), 0);
  EXPECT_EQ(steps.back(), 9999);
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()));
  int events = 0;
  for (const auto& item : b.items) events += std::holds_alternative<Event>(item);
  EXPECT_EQ(events, 10);  // events are never dropped
}

TEST(WriteQueueTest, PutBackGoesInFrontAndKeepsItsDropCount) {
  WriteQueue q(4);
  for (int64_t s = 0; s < 5; ++s) q.push(batch(s));
  Batch failed = q.take();
  ASSERT_EQ(failed.dropped.metric_rows, 2);  // steps 1 and 3
  q.push(batch(5));
  q.put_back(std::move(failed));
  Batch b = q.take();
  // 0, 2, 4 came back in front of 5; then 4 rows > 4? no: exactly 4, nothing more dropped.
  EXPECT_EQ(steps_in(b.items), (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(b.dropped.metric_rows, 2);
  EXPECT_EQ(q.dropped_total(), 2);
}

TEST(WriteQueueTest, SystemRowsThinSeparately) {
  WriteQueue q(6);
  for (int64_t s = 0; s < 4; ++s) q.push(SystemBatch{std::vector<SystemRow>(2)});
  q.push(batch(0));
  Batch b = q.take();
  size_t system = 0;
  for (const auto& item : b.items)
    if (const auto* s = std::get_if<SystemBatch>(&item)) system += s->rows.size();
  EXPECT_EQ(b.dropped.system_rows, 4);
  EXPECT_EQ(b.dropped.metric_rows, 0);
  EXPECT_EQ(system, 4u);
  EXPECT_EQ(b.dropped.describe(), "dropped 4 system rows: the store could not keep up");
}

// A run whose loss is NaN at every step logs an event at every step: through a long stall
// the events thin like rows, the newest and the final status kept and the loss counted.
TEST(WriteQueueTest, EventsAndOtherRecordsAreBoundedToo) {
  WriteQueue q(64, 100);
  for (int64_t s = 0; s < 100000; ++s) {
    q.push(Event{0, 0, s, "nan", "loss is NaN"});
    if (s % 10 == 0) q.push(ValidRow{s, 0, 2.5});
    q.push(Heartbeat{});
    ASSERT_LE(q.records(), 100u);
  }
  q.push(StatusChange{RunStatus::Failed, "diverged", 0});
  Batch b = q.take();
  int64_t events = 0, valid = 0, heartbeats = 0;
  int64_t last_event_step = -1;
  for (const auto& item : b.items) {
    if (const auto* e = std::get_if<Event>(&item)) ++events, last_event_step = *e->step;
    valid += std::holds_alternative<ValidRow>(item);
    heartbeats += std::holds_alternative<Heartbeat>(item);
  }
  EXPECT_EQ(events + b.dropped.events, 100000);
  EXPECT_EQ(valid + b.dropped.valid_rows, 10000);
  EXPECT_EQ(last_event_step, 99999);
  EXPECT_EQ(heartbeats, 1) << "one waiting heartbeat is enough";
  ASSERT_TRUE(std::holds_alternative<StatusChange>(b.items.back()));
  EXPECT_EQ(std::get<StatusChange>(b.items.back()).status, RunStatus::Failed);
  EXPECT_EQ(b.dropped.status_changes, 0);
  EXPECT_EQ(b.dropped.describe(), "dropped " + std::to_string(b.dropped.valid_rows) + " validation rows and " +
                                      std::to_string(b.dropped.events) + " events: the store could not keep up");
}

}  // namespace
}  // namespace kiln::store
