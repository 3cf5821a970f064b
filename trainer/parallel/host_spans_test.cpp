// What a run says about its groups and hosts: Megatron's order keeps a tensor group on one
// host when each host holds whole tensor groups, and the groups laid over them cross.
#include "trainer/parallel/host_spans.h"

#include <gtest/gtest.h>

#include "base/check.h"

namespace kiln {
namespace {

ParallelLayout layout_of(int tp, int pp, int world) {
  ParallelConfig c;
  c.tp = tp;
  c.pp = pp;
  return ParallelLayout(c, world);
}

TEST(HostSpans, OneHostSaysNothing) {
  EXPECT_TRUE(describe_host_spans(layout_of(2, 1, 4), {"a", "a", "a", "a"}).empty());
}

TEST(HostSpans, TensorGroupsWithinAHostAndDataParallelAcross) {
  EXPECT_EQ(describe_host_spans(layout_of(2, 1, 4), {"h-0", "h-0", "h-1", "h-1"}),
            (std::vector<std::string>{"2 hosts: h-0 ranks 0-1; h-1 ranks 2-3", "tensor groups within a host",
                                      "data-parallel groups cross hosts: their collectives go over the network"}));
}

TEST(HostSpans, RanksDealtRoundTheHostsPutEveryGroupAcross) {
  // mpirun --map-by node: rank r on host r mod 2, so each tensor pair spans both.
  EXPECT_EQ(describe_host_spans(layout_of(2, 1, 4), {"h-0", "h-1", "h-0", "h-1"}),
            (std::vector<std::string>{"2 hosts: h-0 ranks 0,2; h-1 ranks 1,3",
                                      "data-parallel groups within a host",
                                      "tensor groups cross hosts: their collectives go over the network"}));
}

TEST(HostSpans, APipelineOverFourHostsOfOneRank) {
  EXPECT_EQ(describe_host_spans(layout_of(1, 2, 4), {"a", "b", "c", "d"}),
            (std::vector<std::string>{"4 hosts: a rank 0; b rank 1; c rank 2; d rank 3",
                                      "data-parallel and pipeline groups cross hosts: their collectives go over the "
                                      "network"}));
}

TEST(HostSpans, RanksByHost) {
  const std::vector<std::string> hosts = {"a", "a", "b", "b"};
  EXPECT_EQ(describe_ranks_by_host({2}, hosts), "rank 2 on b");
  EXPECT_EQ(describe_ranks_by_host({2, 3}, hosts), "ranks 2-3 on b");
  EXPECT_EQ(describe_ranks_by_host({1, 2, 3}, hosts), "rank 1 on a and ranks 2-3 on b");
  EXPECT_EQ(describe_ranks_by_host({0, 2, 5}, hosts), "rank 0 on a, rank 2 on b and rank 5 on ?");
  EXPECT_EQ(describe_ranks_by_host({1, 3}, {"a", "b", "a", "b"}), "ranks 1,3 on b");
}

TEST(HostSpans, ANameForEveryRank) {
  EXPECT_THROW(describe_host_spans(layout_of(2, 1, 4), {"a", "b"}), Error);
}

}  // namespace
}  // namespace kiln
