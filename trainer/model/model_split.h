// How a model's memory is arranged beyond its shape: what it recomputes in backward instead of
// keeping from forward, and how its flat buffers are padded for the ranks that shard them.
#pragma once

#include <string>

namespace kiln {

// train.recompute, Megatron's activation recomputation.
enum class Recompute {
  None,       // every block keeps what its backward reads
  Selective,  // the attention core (its output and log-sum-exps) is recomputed from the saved qkv
  Full,       // each block keeps only its input and runs its forward again before its backward
};

Recompute parse_recompute(const std::string& name);  // "none" | "selective" | "full"

struct ModelSplit {
  Recompute recompute = Recompute::None;
  // The flat parameter and gradient buffers hold a multiple of this many equal shards (the
  // distributed optimizer's data-parallel ranks).
  int flat_shards = 1;
};

}  // namespace kiln
