// Which GPU each rank of a GPU run takes, and the start-up lines that say so. A rank's place
// on its machine is found by comparing host names over the world, so it holds under any
// launcher (mpirun, srun, MPICH's hydra) and agrees with OMPI_COMM_WORLD_LOCAL_RANK and
// SLURM_LOCALID where those are set.
#pragma once

#include <string>
#include <vector>

#include "trainer/parallel/communicator.h"

namespace kiln {

struct NodePlacement {
  int local_rank = 0;  // among the ranks on this machine, in world order
  int local_size = 1;  // ranks on this machine
};

// This rank's place among the ranks whose host name is `host`. Collective over `world`.
NodePlacement node_placement(Communicator& world, const std::string& host);

// The GPU (an index among those CUDA_VISIBLE_DEVICES leaves) of the rank at `placement`: its
// local rank. With NCCL (`shares` false) each rank needs a GPU of its own, which NCCL
// insists on; staged through host memory (`shares` true) ranks beyond the GPUs take them in
// turn. Refuses, in one line, what cannot run.
int gpu_for_rank(const NodePlacement& placement, int visible_gpus, bool shares);

// What one rank trains on.
struct RankGpu {
  std::string host;
  int gpu = 0;         // -1: a CPU rank
  std::string bus_id;  // PCI bus id, "0000:3B:00.0"
  int64_t pid = 0;     // the rank's process on `host`
};

// Every rank's RankGpu on rank 0 of `world`, in rank order (empty on the others). Collective.
std::vector<RankGpu> gather_rank_gpus(Communicator& world, const RankGpu& mine);

// A line per host naming its ranks and their GPUs, for the start-up banner: at most
// `max_hosts` hosts, then how many more.
std::vector<std::string> describe_rank_gpus(const std::vector<RankGpu>& ranks, size_t max_hosts = 8);

// This machine's host name.
std::string host_name();

// The machine a rank counts as on when it picks its GPU: NCCL_HOSTID where it is set, else
// the host name. NCCL takes ranks of different NCCL_HOSTIDs for different machines (its
// duplicate-GPU check looks within one), so ranks given kiln-0, kiln-1, ... on one machine
// each take its first GPU and meet over NCCL's network transport: NCCL's own path, one GPU.
std::string placement_host();

}  // namespace kiln
