#include "trainer/parallel/layout.h"

#include <gtest/gtest.h>

#include "tests/error_of.h"

namespace kiln {
namespace {

ParallelConfig config(int tp, int pp) {
  ParallelConfig c;
  c.tp = tp;
  c.pp = pp;
  return c;
}

TEST(ParallelLayout, OrdersRanksTensorFastestThenDataThenPipeline) {
  // Megatron's example: 16 ranks, tp 2, pp 4 -> dp 2.
  const ParallelLayout layout(config(2, 4), 16);
  EXPECT_EQ(layout.dp(), 2);
  EXPECT_EQ(layout.name(), "tp2.pp4.dp2");
  EXPECT_EQ(layout.tensor_group(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(layout.data_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(layout.pipeline_group(5), (std::vector<int>{1, 5, 9, 13}));
  const RankCoordinates c = layout.coordinates(11);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 2);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(layout.rank_of(layout.coordinates(r)), r);
}

TEST(ParallelLayout, OneProcessIsTheTrivialLayout) {
  const ParallelLayout layout(ParallelConfig{}, 1);
  EXPECT_EQ(layout.name(), "tp1.pp1.dp1");
  EXPECT_EQ(layout.data_group(0), std::vector<int>{0});
}

TEST(ParallelLayout, AWorldThatDoesNotFitIsRefusedWithTheArithmetic) {
  EXPECT_EQ(test::error_of([] { ParallelLayout layout(config(2, 2), 6); }),
            "parallel: 6 processes do not fit parallel.tp=2 x parallel.pp=2 = 4: the world size "
            "must be a multiple of 4 (data-parallel size = world / 4)");
  EXPECT_EQ(test::error_of([] { ParallelLayout layout(config(2, 1), 1); }),
            "parallel: 1 process does not fit parallel.tp=2 x parallel.pp=1 = 2: the world size "
            "must be a multiple of 2 (data-parallel size = world / 2)");
}

TEST(ParallelLayout, ShardGroupsAreConsecutiveGradientRanksAndTheirCopiesTheRest) {
  // 16 ranks, tp 2, dp 8, shard groups of 4: rank 11 (tp 1, dp 5) shares its state with the
  // tensor rank 1 of dp 4..7, and its copy in the other group is dp 1.
  ParallelConfig c = config(2, 1);
  c.shard_group = 4;
  const ParallelLayout layout(c, 16);
  EXPECT_TRUE(layout.replicates_shards());
  EXPECT_EQ(layout.gradient_group(11), (std::vector<int>{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(layout.shard_group(11), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(layout.shard_replica_group(11), (std::vector<int>{3, 11}));
  c.shard_group = 0;
  EXPECT_FALSE(ParallelLayout(c, 16).replicates_shards());
  EXPECT_EQ(ParallelLayout(c, 16).shard_group(11), layout.gradient_group(11));
  c.shard_group = 3;
  EXPECT_EQ(test::error_of([&] { ParallelLayout refused(c, 16); }),
            "parallel: parallel.shard_group=3 does not divide the 8 ranks that sum each gradient (dp 8 x cp 1)");
}

TEST(ParallelLayout, ContextGroupsSitBetweenTensorAndDataRanks) {
  // 16 ranks, tp 2, cp 2, pp 2 -> dp 2: rank = tp + 2 (cp + 2 (dp + 2 pp)).
  ParallelConfig c = config(2, 2);
  c.cp = 2;
  const ParallelLayout layout(c, 16);
  EXPECT_EQ(layout.dp(), 2);
  EXPECT_EQ(layout.name(), "tp2.cp2.pp2.dp2");
  // Rank 13: tp 1, cp 0, dp 1, pp 1.
  const RankCoordinates at = layout.coordinates(13);
  EXPECT_EQ(at.tp, 1);
  EXPECT_EQ(at.cp, 0);
  EXPECT_EQ(at.dp, 1);
  EXPECT_EQ(at.pp, 1);
  EXPECT_EQ(layout.rank_of(at), 13);
  EXPECT_EQ(layout.tensor_group(13), (std::vector<int>{12, 13}));
  EXPECT_EQ(layout.context_group(13), (std::vector<int>{13, 15}));
  EXPECT_EQ(layout.data_group(13), (std::vector<int>{9, 13}));
  EXPECT_EQ(layout.pipeline_group(13), (std::vector<int>{5, 13}));
  // The gradients' sum covers both data-parallel replicas' context groups.
  EXPECT_EQ(layout.gradient_group(13), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(layout.model_share(), "1/4 of the model");
  EXPECT_EQ(test::error_of([&] { ParallelLayout odd(c, 12); }),
            "parallel: 12 processes do not fit parallel.tp=2 x parallel.cp=2 x parallel.pp=2 = 8: the world "
            "size must be a multiple of 8 (data-parallel size = world / 8)");
}

TEST(ParallelLayout, ExpertGroupsSplitTheDataParallelRanks) {
  // 16 ranks, tp 2, pp 2 -> dp 4; ep 2: replicas {0, 1} and {2, 3} of each stage trade
  // tokens, and {0, 2} and {1, 3} hold the same experts.
  ParallelConfig c = config(2, 2);
  c.ep = 2;
  const ParallelLayout layout(c, 16);
  EXPECT_EQ(layout.name(), "tp2.pp2.dp4.ep2");
  EXPECT_EQ(layout.edp(), 2);
  // Rank 13: tp 1, dp 2, pp 1.
  EXPECT_EQ(layout.expert_group(13), (std::vector<int>{13, 15}));
  EXPECT_EQ(layout.expert_data_group(13), (std::vector<int>{9, 13}));
  EXPECT_EQ(layout.expert_coordinates(13).ep, 0);
  EXPECT_EQ(layout.expert_coordinates(13).edp, 1);
  EXPECT_EQ(layout.expert_coordinates(15).ep, 1);
  EXPECT_EQ(layout.expert_data_group(15), (std::vector<int>{11, 15}));
  EXPECT_TRUE(layout.splits_model());
  EXPECT_EQ(layout.model_share(), "1/4 of the model and 1/8 of the experts");
  ParallelConfig experts_only;
  experts_only.ep = 2;
  EXPECT_EQ(ParallelLayout(experts_only, 4).model_share(), "1/2 of the experts");
  EXPECT_FALSE(ParallelLayout(ParallelConfig{}, 4).splits_model());
}

TEST(ParallelLayout, ExpertParallelismMustDivideTheDataParallelRanks) {
  ParallelConfig c = config(1, 2);
  c.ep = 4;
  EXPECT_EQ(test::error_of([&] { ParallelLayout layout(c, 4); }),
            "parallel: parallel.ep=4 does not divide the 2 data-parallel ranks (world 4 / (tp 1 x "
            "pp 2)): expert parallelism splits the data-parallel ranks");
}

TEST(ParallelLayout, WholeExpertsFoldTheExpertGroupsOverTensorAndDataRanks) {
  // 16 ranks, tp 2, pp 2 -> dp 4, etp 1, ep 4: a stage's 8 ranks (i = tp + 2 dp) are its
  // expert units, in groups of 4 consecutive ones; units i and i + 4 hold the same experts.
  ParallelConfig c = config(2, 2);
  c.ep = 4;
  c.etp = 1;
  c.sequence_parallel = true;
  const ParallelLayout layout(c, 16);
  EXPECT_EQ(layout.name(), "tp2.pp2.dp4.ep4.etp1");
  EXPECT_EQ(layout.edp(), 2);
  EXPECT_TRUE(layout.expert_layout());
  // Rank 13: tp 1, dp 2, pp 1: unit 5 of stage 1 (ranks 8-15).
  EXPECT_EQ(layout.expert_group(13), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(layout.expert_data_group(13), (std::vector<int>{9, 13}));
  const ExpertCoordinates at = layout.expert_coordinates(13);
  EXPECT_EQ(at.etp, 0);
  EXPECT_EQ(at.ep, 1);
  EXPECT_EQ(at.edp, 1);
  EXPECT_EQ(layout.model_share(), "1/4 of the model and 1/8 of the experts");
  // ep 1: every rank holds every expert whole, their gradients summed over the whole stage.
  c.ep = 1;
  const ParallelLayout whole(c, 16);
  EXPECT_EQ(whole.name(), "tp2.pp2.dp4.etp1");
  EXPECT_TRUE(whole.expert_layout());
  EXPECT_EQ(whole.expert_group(13), (std::vector<int>{13}));
  EXPECT_EQ(whole.expert_data_group(13), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(whole.model_share(), "1/4 of the model and 1/2 of the experts");
  // etp 2 is tp: the experts split as the dense MLPs are, the groups those of the replicas.
  c.etp = 2;
  EXPECT_FALSE(ParallelLayout(c, 16).expert_layout());
  EXPECT_EQ(ParallelLayout(c, 16).name(), "tp2.pp2.dp4");
}

TEST(ParallelLayout, FoldedExpertParallelismMustDivideAStage) {
  ParallelConfig c = config(2, 1);
  c.ep = 4;
  c.etp = 1;
  c.sequence_parallel = true;
  EXPECT_EQ(test::error_of([&] { ParallelLayout layout(c, 6); }),
            "parallel: parallel.ep=4 does not divide the 6 ranks of a pipeline stage (world 6 / pp 1): "
            "with parallel.etp=1 expert parallelism splits a stage's tensor and data-parallel ranks "
            "together");
}

}  // namespace
}  // namespace kiln
