#include "monitor/tui/run_layout.h"

#include <gtest/gtest.h>

namespace kiln::tui {
namespace {

TEST(RunLayout, AnOrdinaryTerminalShowsTheRanksAboveShortPlots) {
  const RunLayout l = run_layout(23, 2, false);
  EXPECT_EQ(l.ranks_top, 4);
  EXPECT_EQ(l.ranks_rows, 2);
  EXPECT_EQ(l.plots_top, 4 + 2 + 2 + 1);
  EXPECT_EQ(l.plot_height, 8);
  EXPECT_EQ(l.events_top, l.plots_top + l.plot_height + 1);
  EXPECT_LT(l.events_top, 23);
}

TEST(RunLayout, ATallTerminalGivesThePlotsHalfItsRowsAndTheRanksTableBelowThem) {
  const RunLayout l = run_layout(59, 8, true);
  EXPECT_EQ(l.plots_top, 5);
  EXPECT_EQ(l.plot_height, 29);
  EXPECT_EQ(l.ranks_top, l.plots_top + l.plot_height + 1);
  EXPECT_EQ(l.ranks_rows, 8);
  EXPECT_EQ(l.events_top, l.ranks_top + 2 + 8 + 1);
  EXPECT_GE(59 - l.events_top, 6);
}

TEST(RunLayout, ManyRanksScrollSoTheEventsKeepTheirRows) {
  const RunLayout l = run_layout(39, 64, true);
  EXPECT_EQ(l.ranks_rows, 5);
  EXPECT_EQ(39 - l.events_top, 6);
}

TEST(RunLayout, AnExpertsBlockGoesAboveTheEventsInEitherLayout) {
  const RunLayout plain = run_layout(23, 2, false);
  const RunLayout moe = run_layout(23, 2, false, 3);
  EXPECT_EQ(moe.plots_top, plain.plots_top);
  EXPECT_EQ(moe.plot_height, 6) << "the plots give up rows for the block";
  EXPECT_EQ(moe.experts_top, moe.plots_top + moe.plot_height + 1);
  EXPECT_EQ(moe.events_top, moe.experts_top + 3 + 1);
  EXPECT_LT(moe.events_top, 23);

  const RunLayout tall = run_layout(41, 64, true, 4);
  EXPECT_EQ(tall.plot_height, 20);
  EXPECT_EQ(tall.ranks_rows, 1) << "the ranks scroll so the events keep their rows";
  EXPECT_EQ(tall.experts_top, tall.ranks_top + 2 + tall.ranks_rows + 1);
  EXPECT_EQ(tall.events_top, tall.experts_top + 4 + 1);
  EXPECT_EQ(41 - tall.events_top, 6);
}

}  // namespace
}  // namespace kiln::tui
