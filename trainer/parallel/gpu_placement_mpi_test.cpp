// Placing 4 ranks on machines by their host names, as a GPU run does before it picks GPUs.
#include <gtest/gtest.h>

#include "trainer/parallel/gpu_placement.h"
#include "trainer/parallel/mpi_communicator.h"

namespace kiln {
namespace {

TEST(GpuPlacementOverMpi, RanksCountTheirPlaceAmongThoseOnTheirHost) {
  const auto world = MpiSession::world();
  const int r = world->rank();
  // mpirun started all four here.
  const NodePlacement here = node_placement(*world, host_name());
  EXPECT_EQ(here.local_rank, r);
  EXPECT_EQ(here.local_size, 4);
  // As if ranks 0 and 2 ran on one machine and 1 and 3 on another.
  const NodePlacement split = node_placement(*world, r % 2 == 0 ? "node-a" : "node-b");
  EXPECT_EQ(split.local_rank, r / 2);
  EXPECT_EQ(split.local_size, 2);

  const std::vector<RankGpu> ranks =
      gather_rank_gpus(*world, {r % 2 == 0 ? "node-a" : "node-b", r / 2, "0000:0" + std::to_string(r) + ":00.0"});
  if (r != 0) {
    EXPECT_TRUE(ranks.empty());
    return;
  }
  EXPECT_EQ(describe_rank_gpus(ranks),
            (std::vector<std::string>{"GPUs on node-a: rank 0 on GPU 0 (0000:00:00.0), rank 2 on GPU 1 (0000:02:00.0)",
                                      "GPUs on node-b: rank 1 on GPU 0 (0000:01:00.0), rank 3 on GPU 1 (0000:03:00.0)"}));
}

}  // namespace
}  // namespace kiln
