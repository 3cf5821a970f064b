// The memory one rank of a layout allocates, arena by arena, from the trainer's own sizing:
// the rank's model laid out over planned groups (rank_build.h, planned_group.h), its
// parameters padded as allocate() pads them, the optimizer's state laid out by AdamW, and the
// op workspace the backend reserves for the rank's attention.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/parallel/layout.h"
#include "trainer/plan/rank_build.h"

namespace kiln {

struct RankMemory {
  // parameters, gradients, activations, scratch, [recomputed], op workspace, optimizer
  std::vector<ArenaSize> arenas;
  size_t total() const;
  size_t bytes(const std::string& arena) const;  // 0 when the rank has no such arena
};

// The op workspace a backend reserves for one rank: on the CPU each of `threads` threads'
// attention scratch; on a GPU kiln's attention backward (a float per query row and head) and
// cuBLASLt's 32 MiB (cuDNN's fused attention may take more, found only on the GPU).
size_t op_workspace_bytes(bool gpu, int threads, int64_t micro_batch, int64_t seq, int64_t heads, int64_t head_dim);

// The groups of `rank` as planned groups (planned_group.h): their sizes and its place in
// each, as ParallelLayout names them; `held` owns them.
RankGroups planned_rank_groups(const ParallelLayout& layout, int rank,
                               std::vector<std::unique_ptr<Communicator>>& held);

// Rank `rank` of `layout` under `config`: what Trainer allocates on that rank when it computes
// on `device` (the dtype of fp8's activations depends on it). sizing_ops is any backend:
// laying out calls none of it.
RankMemory plan_rank_memory(const Config& config, const ParallelLayout& layout, int rank, Device device,
                            Ops& sizing_ops, size_t op_workspace);

}  // namespace kiln
