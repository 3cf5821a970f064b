#include "trainer/parallel/gpu_placement.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/error_of.h"

namespace kiln {
namespace {

TEST(GpuPlacement, EachRankTakesTheGpuOfItsPlaceOnItsMachine) {
  EXPECT_EQ(gpu_for_rank({0, 1}, 1, false), 0);
  EXPECT_EQ(gpu_for_rank({3, 8}, 8, false), 3);
  EXPECT_EQ(gpu_for_rank({1, 2}, 4, false), 1);  // GPUs left over stay idle
  // Staged through host memory, ranks beyond the GPUs take them in turn.
  EXPECT_EQ(gpu_for_rank({5, 8}, 1, true), 0);
  EXPECT_EQ(gpu_for_rank({5, 8}, 2, true), 1);
  EXPECT_EQ(gpu_for_rank({5, 8}, 8, true), 5);
}

TEST(GpuPlacement, NcclRefusesMoreRanksThanGpusSayingWhatToDo) {
  EXPECT_EQ(test::error_of([] { gpu_for_rank({0, 2}, 1, false); }),
            "parallel.device_comm=nccl: 2 ranks on this machine but 1 GPU visible, and NCCL refuses two "
            "ranks on one GPU (\"Duplicate GPU detected\"); start one rank a GPU, or share the GPUs with "
            "parallel.device_comm=mpi");
  EXPECT_NE(test::error_of([] { gpu_for_rank({0, 8}, 4, false); }).find("8 ranks on this machine but 4 GPUs"),
            std::string::npos);
}

TEST(GpuPlacement, AWorldOfOneIsAloneOnItsMachine) {
  const auto world = make_single_process_communicator();
  const NodePlacement placement = node_placement(*world, host_name());
  EXPECT_EQ(placement.local_rank, 0);
  EXPECT_EQ(placement.local_size, 1);
  const std::vector<RankGpu> ranks = gather_rank_gpus(*world, {"node-a", 2, "0000:3B:00.0"});
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].host, "node-a");
  EXPECT_EQ(ranks[0].gpu, 2);
  EXPECT_EQ(ranks[0].bus_id, "0000:3B:00.0");
}

TEST(GpuPlacement, NcclHostIdNamesTheMachineARankCountsAsOn) {
  // Each rank of kiln-0, kiln-1, ... is alone on its machine, as NCCL sees them: each takes
  // GPU 0 and NCCL's duplicate-GPU check finds no second rank there.
  const char* before = std::getenv("NCCL_HOSTID");
  const std::string saved = before ? before : "";
  setenv("NCCL_HOSTID", "kiln-1", 1);
  EXPECT_EQ(placement_host(), "kiln-1");
  const auto world = make_single_process_communicator();
  EXPECT_EQ(gpu_for_rank(node_placement(*world, placement_host()), 1, false), 0);
  setenv("NCCL_HOSTID", "", 1);
  EXPECT_EQ(placement_host(), host_name());
  unsetenv("NCCL_HOSTID");
  EXPECT_EQ(placement_host(), host_name());
  if (before) setenv("NCCL_HOSTID", saved.c_str(), 1);
}

TEST(GpuPlacement, StartUpLinesNameEachHostsRanksAndGpus) {
  const std::vector<RankGpu> ranks = {{"a", 0, "0000:1B:00.0"}, {"a", 1, "0000:3B:00.0"}, {"b", 0, "0000:1B:00.0"}};
  EXPECT_EQ(describe_rank_gpus(ranks),
            (std::vector<std::string>{"GPUs on a: rank 0 on GPU 0 (0000:1B:00.0), rank 1 on GPU 1 (0000:3B:00.0)",
                                      "GPUs on b: rank 2 on GPU 0 (0000:1B:00.0)"}));
  EXPECT_EQ(describe_rank_gpus(ranks, 1),
            (std::vector<std::string>{"GPUs on a: rank 0 on GPU 0 (0000:1B:00.0), rank 1 on GPU 1 (0000:3B:00.0)",
                                      "and 1 more host"}));
}

}  // namespace
}  // namespace kiln
