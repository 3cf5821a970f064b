#include "monitor/tui/run_layout.h"

#include <gtest/gtest.h>

namespace kiln::tui {
namespace {

TEST(RunLayout, AnOrdinaryTerminalShowsTheRanksAboveShortPlots) {
  const RunLayout l = run_layout(23, 2, false);
  EXPECT_EQ(l.ranks_top, 3);
  EXPECT_EQ(l.ranks_rows, 2);
  EXPECT_EQ(l.plots_top, 3 + 2 + 2 + 1);
  EXPECT_EQ(l.plot_height, 8);
  EXPECT_EQ(l.events_top, l.plots_top + l.plot_height + 1);
  EXPECT_LT(l.events_top, 23);
}

TEST(RunLayout, ATallTerminalGivesThePlotsHalfItsRowsAndTheRanksTableBelowThem) {
  const RunLayout l = run_layout(59, 8, true);
  EXPECT_EQ(l.plots_top, 4);
  EXPECT_EQ(l.plot_height, 29);
  EXPECT_EQ(l.ranks_top, l.plots_top + l.plot_height + 1);
  EXPECT_EQ(l.ranks_rows, 8);
  EXPECT_EQ(l.events_top, l.ranks_top + 2 + 8 + 1);
  EXPECT_GE(59 - l.events_top, 6);
}

TEST(RunLayout, ManyRanksScrollSoTheEventsKeepTheirRows) {
  const RunLayout l = run_layout(39, 64, true);
  EXPECT_EQ(l.ranks_rows, 6);
  EXPECT_EQ(39 - l.events_top, 6);
}

}  // namespace
}  // namespace kiln::tui
