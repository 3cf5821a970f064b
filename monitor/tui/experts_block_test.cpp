#include "monitor/tui/experts_block.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "monitor/tui/test_screen.h"

namespace kiln::tui {
namespace {

store::ExpertLoad load(int layer, std::vector<int64_t> tokens, double aux, int64_t step = 120) {
  store::ExpertLoad l;
  l.step = step;
  l.layer = layer;
  l.tokens = std::move(tokens);
  l.aux_loss = aux;
  return l;
}

TEST(ExpertsBlock, ShowsTheWorstLayerTheAuxLossAndEachLayersImbalance) {
  // Imbalances: 1.00, 2.50 (100 of 160 over 4), 1.60 (80 of 200 over 4), none routed.
  const std::vector<store::ExpertLoad> latest = {
      load(1, {25, 25, 25, 25}, 0.010), load(3, {100, 20, 20, 20}, 0.020, 119),
      load(5, {80, 40, 40, 40}, 0.030), load(7, {0, 0, 0, 0}, 0.040)};
  TestScreen screen(110, 6);
  EXPECT_EQ(experts_block_rows(latest, 110), 2);
  draw_experts_block(1, 110, latest, Theme(false));
  EXPECT_EQ(screen.row(1),
            " experts: worst imbalance 2.50 at layer 3 (4 MoE layers, step 120), aux loss 0.025 (mean of the "
            "layers)");
  EXPECT_EQ(screen.row(2), "  L1 1.00    L3 2.50    L5 1.60    L7 -");
}

TEST(ExpertsBlock, ManyLayersWrapAndTheRestAreCounted) {
  std::vector<store::ExpertLoad> latest;
  for (int layer = 0; layer < 40; ++layer) latest.push_back(load(layer, {30, 10}, 0.5));
  TestScreen screen(46, 6);
  // 4 cells to a row of 46 columns: 10 rows would be needed, 3 are shown.
  EXPECT_EQ(experts_block_rows(latest, 46), 4);
  draw_experts_block(0, 46, latest, Theme(false));
  EXPECT_EQ(screen.row(1), "  L0 1.50    L1 1.50    L2 1.50    L3 1.50");
  EXPECT_EQ(screen.row(3), "  L8 1.50    L9 1.50    L10 1.50   +29 more");
}

TEST(ExpertsBlock, ADenseRunHasNoBlock) {
  TestScreen screen(80, 3);
  EXPECT_EQ(experts_block_rows({}, 80), 0);
  draw_experts_block(0, 80, {}, Theme(false));
  EXPECT_EQ(screen.text(), "\n\n\n");
}

}  // namespace
}  // namespace kiln::tui
