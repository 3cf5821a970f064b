#include "monitor/tui/ranks_block.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "monitor/tui/test_screen.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::tui {
namespace {

using store::testing_util::run_info;

class RanksBlockTest : public store::testing_util::StoreTest {
 protected:
  // `ranks` ranks on hosts of two ranks each logging steps 1..steps; rank `slow` works
  // `factor` times as long as the median from step `slow_from` on. Keeps the slowest rank
  // the store names at the latest step in slowest_.
  store::RankHeat heat_of(int ranks, int64_t steps, int slow, int64_t slow_from, double factor) {
    store::RunWriter writer(path());
    const int64_t id = writer.create_run(run_info("heat"));
    for (int r = 0; r < ranks; ++r) places_.push_back({r, "node-" + std::to_string(r / 2), "cpu", {}});
    writer.record_ranks(places_);
    for (int64_t step = 1; step <= steps; ++step) {
      std::vector<store::MetricRow> rows;
      for (int r = 0; r < ranks; ++r) {
        store::MetricRow m;
        m.step = step;
        m.rank = r;
        m.fwd_ms = r == slow && step >= slow_from ? 10 * factor : 10;
        rows.push_back(m);
      }
      writer.log_metrics(rows);
    }
    writer.finish(store::RunStatus::Completed);
    writer.flush();
    auto db = store::open_store(path(), store::Access::ReadOnly);
    slowest_ = store::ranks_now(*db, id).slowest;
    return store::rank_heat(*db, id, store::HeatQuery{});
  }

  std::vector<store::RankPlace> places_;
  std::optional<int> slowest_;
};

TEST(RanksBlockCells, ShadesGrowWithTheRatioToTheMedian) {
  const std::vector<double> relative = {1.0, 1.1, 1.3, 1.45, 2.0, store::kNoValue, 0.5};
  EXPECT_EQ(heat_cells(relative, true), "·░▒▓█ ·");
  EXPECT_EQ(heat_cells(relative, false), ".-+*# .");
}

TEST_F(RanksBlockTest, ALineARankWithTheSlowOneMarked) {
  const store::RankHeat heat = heat_of(4, 10, 2, 7, 1.5);
  ASSERT_EQ(ranks_block_rows(heat), 5);
  TestScreen screen(80, 7);
  draw_ranks_block(1, 80, heat, places_, slowest_, Theme(false));
  EXPECT_EQ(screen.row(1), " ranks: working time / median rank's, steps 1-10 (· even, ░▒▓█ slower)");
  EXPECT_EQ(screen.row(2), " r0    node-0     ··········   1.00x");
  EXPECT_EQ(screen.row(4), " r2    node-1     ······▓▓▓▓   1.50x");
  EXPECT_EQ(screen.row(5), " r3    node-1     ··········   1.00x");
  // Monochrome's bad tone (bold, underlined) on the slow rank's line alone.
  const int bad = Theme(false).attr(Tone::Bad);
  EXPECT_EQ(screen.attributes(4, 1) & bad, bad);
  EXPECT_EQ(screen.attributes(2, 1) & bad, 0);
}

// A rank only 2% slower than the others: its shades read even, but it is the rank the store
// names the slowest (and the ranks table and the dashboard highlight), so its line is marked.
TEST_F(RanksBlockTest, TheMarkedLineIsTheRankTheStoreNamesSlowest) {
  const store::RankHeat heat = heat_of(4, 10, 1, 1, 1.02);
  ASSERT_EQ(slowest_, 1);
  TestScreen screen(80, 7);
  draw_ranks_block(1, 80, heat, places_, slowest_, Theme(false));
  EXPECT_EQ(screen.row(3), " r1    node-0     ··········   1.02x");
  const int bad = Theme(false).attr(Tone::Bad);
  for (int line = 2; line <= 5; ++line) EXPECT_EQ((screen.attributes(line, 1) & bad) == bad, line == 3) << line;
}

TEST_F(RanksBlockTest, AManyRankWorldShowsItsSlowest) {
  const store::RankHeat heat = heat_of(12, 4, 9, 1, 1.25);
  EXPECT_EQ(ranks_block_rows(heat), 1 + kMaxStripRanks);
  TestScreen screen(60, 10);
  draw_ranks_block(0, 60, heat, places_, slowest_, Theme(false));
  EXPECT_NE(screen.row(0).find("ranks, the 8 slowest of 12:"), std::string::npos) << screen.row(0);
  std::string text = screen.text();
  EXPECT_NE(text.find(" r9    node-4     ▒▒▒▒   1.25x"), std::string::npos) << text;
}

TEST_F(RanksBlockTest, OneRankHasNoBlock) {
  const store::RankHeat heat = heat_of(1, 3, -1, 1, 1);
  EXPECT_EQ(ranks_block_rows(heat), 0);
}

}  // namespace
}  // namespace kiln::tui
