// Readers query while the writer commits: WAL lets them run side by side; a reader must
// never block, never fail, and only ever see whole log intervals.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::interval;
using testing_util::loss_of;
using testing_util::run_info;
using testing_util::StoreTest;

class ConcurrencyTest : public StoreTest {};

TEST_F(ConcurrencyTest, ReadersSeeWholeIntervalsWhileTheWriterCommits) {
  constexpr int kRanks = 8, kSteps = 3000;
  RunWriter writer(path());
  const int64_t run = writer.create_run(run_info("busy"));

  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::mutex failure_mutex;
  std::string failure;
  auto report = [&](const std::string& what) {
    std::lock_guard lock(failure_mutex);
    if (failure.empty()) failure = what;
  };
  // Every row, buckets of rows (100 points), and buckets of whole blocks (10 points), which
  // read blocks, rows and the step range in separate statements of one snapshot.
  auto reader = [&](size_t max_points) {
    const bool downsample = max_points > 0;
    try {
      auto db = open_store(path(), Access::ReadOnly);
      size_t seen = 0;
      while (!done.load()) {
        SeriesQuery q;
        q.max_points = max_points;
        const auto series = metric_series(*db, run, q);
        const size_t n = series.empty() ? 0 : series[0].points.size();
        if (!series.empty() && series.size() != kRanks) report("a partial interval: ranks");
        for (const auto& s : series) {
          if (s.points.size() != n) report("a partial interval: lengths");
          if (!downsample)
            for (size_t i = 0; i < s.points.size(); ++i)
              if (s.points[i].step != static_cast<int64_t>(i) ||
                  s.points[i].value != loss_of(s.points[i].step, s.rank))
                report("a wrong row at step " + std::to_string(i));
        }
        if (!downsample && n < seen) report("rows went backwards");
        seen = std::max(seen, n);
        if (list_runs(*db).size() != 1) report("list_runs");
        ++reads;
      }
    } catch (const std::exception& e) {
      report(std::string("reader failed: ") + e.what());
    }
  };
  std::thread a(reader, 0), b(reader, 100), c(reader, 10);
  for (int64_t step = 0; step < kSteps; ++step) {
    writer.log_metrics(interval(step, kRanks));
    if (step % 25 == 0) writer.flush();  // commit in many small transactions
  }
  writer.flush();
  done = true;
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(failure, "");
  EXPECT_GT(reads.load(), 10);
  auto db = open_store(path(), Access::ReadOnly);
  const auto series = metric_series(*db, run, SeriesQuery{});
  ASSERT_EQ(series.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(series[7].points.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(writer.stats().dropped_rows, 0);
}

}  // namespace
}  // namespace kiln::store
