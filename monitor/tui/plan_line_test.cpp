#include "monitor/tui/plan_line.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "monitor/tui/test_screen.h"
#include "store/run_figures.h"

namespace kiln::tui {
namespace {

// Rank `rank`'s latest row: step 20 of a run of 2048 tokens a step at `tokens_per_s`.
store::MetricRow row(int rank, double tokens_per_s, std::optional<int64_t> mem_used) {
  store::MetricRow r;
  r.step = 20;
  r.rank = rank;
  r.tokens = 20 * 2048;
  r.tokens_per_s = tokens_per_s;
  r.mem_used = mem_used;
  return r;
}

// Rank 0's tokens/s at its last `steps` logged steps, each a step of `step_s` (2048 tokens).
std::vector<double> rates(double step_s, size_t steps = store::kPersistentSteps) {
  return std::vector<double>(steps, 2048 / step_s);
}

store::RunRecord planned(double step_s, std::optional<int64_t> bytes) {
  store::RunRecord run;
  run.planned_step_s = step_s;
  run.planned_memory_bytes = bytes;
  return run;
}

TEST(PlanLine, ShowsPlannedBesideRankZerosMeasuredStepAndMemory) {
  // 2048 tokens at 204800 tokens/s: 10 ms a step, against 9 ms planned (11% slower: not marked).
  const std::vector<store::MetricRow> latest = {row(1, 1e5, int64_t{1} << 30), row(0, 204800, 70 << 20)};
  const auto line = plan_line(planned(0.009, 66 << 20), latest, rates(0.010));
  ASSERT_TRUE(line.has_value());
  EXPECT_FALSE(line->slower);
  EXPECT_EQ(line->text(), "planned 9.0 ms/step · measured 10.0 ms/step · planned memory 66.0 MiB · measured 70.0 MiB");

  TestScreen screen(120, 2);
  draw_plan_line(1, 120, planned(0.009, 66 << 20), latest, rates(0.010), Theme(false));
  EXPECT_EQ(screen.row(1), " planned 9.0 ms/step · measured 10.0 ms/step · planned memory 66.0 MiB · measured 70.0 MiB");
}

TEST(PlanLine, MarksARunWhoseRecentStepsAreMoreThanTwentyPercentSlowerThanPlanned) {
  // 12.5 ms at each of the last five logged steps against 10 ms planned: 25% slower.
  const auto slow = plan_line(planned(0.010, 66 << 20), {row(0, 163840, 70 << 20)}, rates(0.0125));
  ASSERT_TRUE(slow.has_value());
  EXPECT_TRUE(slow->slower);
  EXPECT_EQ(slow->measured_step, "measured 12.5 ms/step");
  EXPECT_EQ(slow->text(), "planned 10.0 ms/step · measured 12.5 ms/step (slower than planned) · planned memory "
                          "66.0 MiB · measured 70.0 MiB");
  // 11.9 ms is within 20%.
  EXPECT_FALSE(plan_line(planned(0.010, 66 << 20), {row(0, 2048 / 0.0119, 70 << 20)}, rates(0.0119))->slower);
}

TEST(PlanLine, MarksOnlyASlowdownThatLastsOverTheRecentSteps) {
  const std::vector<store::MetricRow> slow_now = {row(0, 2048 / 0.030, 70 << 20)};
  // One slow step (30 ms, while another run started beside it) among steps on plan: the
  // median of the last five is 10 ms, and the line shows the slow step unmarked.
  std::vector<double> recent = rates(0.010, 8);
  recent.back() = 2048 / 0.030;
  const auto once = plan_line(planned(0.010, 66 << 20), slow_now, recent);
  EXPECT_EQ(once->measured_step, "measured 30.0 ms/step");
  EXPECT_FALSE(once->slower);
  // Two slow of the last five: still the median is on plan.
  recent[recent.size() - 2] = 2048 / 0.030;
  EXPECT_FALSE(plan_line(planned(0.010, 66 << 20), slow_now, recent)->slower);
  // Three of five: it lasts.
  recent[recent.size() - 3] = 2048 / 0.030;
  EXPECT_TRUE(plan_line(planned(0.010, 66 << 20), slow_now, recent)->slower);
  // Slow from the start, but fewer logged steps than a slowdown must last: not yet.
  EXPECT_FALSE(plan_line(planned(0.010, 66 << 20), slow_now, rates(0.030, store::kPersistentSteps - 1))->slower);
  EXPECT_TRUE(plan_line(planned(0.010, 66 << 20), slow_now, rates(0.030))->slower);
}

TEST(PlanLine, AbsentFiguresShowADashAndARunWithoutAPlanHasNoLine) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(plan_line(planned(nan, std::nullopt), {row(0, 204800, 70 << 20)}, rates(0.010)).has_value());
  // Before the first log, and with a rate that measured nothing.
  const auto early = plan_line(planned(0.009, std::nullopt), {}, {});
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->text(), "planned 9.0 ms/step · measured - ms/step · planned memory - · measured -");
  EXPECT_FALSE(early->slower);
  EXPECT_EQ(plan_line(planned(0.009, 1024), {row(0, 0, std::nullopt)}, {})->measured_step, "measured - ms/step");
  EXPECT_EQ(plan_line(planned(-1, 1024), {row(0, nan, std::nullopt)}, {})->planned_step, "planned - ms/step");
  // A recent step that measured nothing marks nothing.
  std::vector<double> gap = rates(0.030);
  gap[2] = nan;
  EXPECT_FALSE(plan_line(planned(0.010, 1024), {row(0, 2048 / 0.030, std::nullopt)}, gap)->slower);
  TestScreen screen(40, 2);
  draw_plan_line(0, 40, planned(nan, std::nullopt), {}, {}, Theme(false));
  EXPECT_EQ(screen.text(), "\n\n");
}

}  // namespace
}  // namespace kiln::tui
