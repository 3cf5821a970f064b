// How a model is arranged beyond its shape: what it recomputes in backward instead of keeping
// from forward, the tensor-parallel group its layers are split over, and how its flat buffers
// are padded for the ranks that shard them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainer/model/parameters.h"
#include "trainer/parallel/communicator.h"
#include "trainer/precision/fp8_scaling.h"

namespace kiln {

// train.recompute, Megatron's activation recomputation.
enum class Recompute {
  None,       // every block keeps what its backward reads
  Selective,  // the attention core (its output and log-sum-exps) is recomputed from the saved qkv
  Full,       // each block keeps only its input and runs its forward again before its backward
};

Recompute parse_recompute(const std::string& name);  // "none" | "selective" | "full"

// A run of consecutive layers one pipeline rank holds: a virtual stage. The model's first
// virtual stage also embeds the tokens; its last also holds the final norm, the output
// layer and the loss.
struct PipelineChunk {
  int first_layer = 0;
  int end_layer = 0;  // one past the last
  bool embedding = false;
  bool head = false;

  int layers() const { return end_layer - first_layer; }
};

struct ModelSplit {
  Recompute recompute = Recompute::None;
  // The tensor-parallel group the layers split their heads, hidden units and vocabulary over
  // (null: tp = 1).
  Communicator* tensor = nullptr;
  // The flat parameter and gradient buffers hold a multiple of this many equal shards (the
  // distributed optimizer's data-parallel ranks), their expert region a multiple of
  // expert_shards (its expert-data-parallel ranks).
  int flat_shards = 1;
  int expert_shards = 1;
  // parallel.shard=gradients or parameters: the flat buffers laid out in units over
  // flat_shards ranks (ParameterSet::shard_units), of which this one holds shard
  // flat_shard_rank, the values sharded too with shard_values; the experts' parts over
  // expert_shards, of which this one holds expert_shard_rank.
  bool shard_units = false;
  int flat_shard_rank = 0;
  int expert_shard_rank = 0;
  bool shard_values = false;
  // parallel.shard_per_step: every unit kept whole for the step (the head and the embeddings
  // of a tied model always are).
  bool shard_per_step = false;
  // parallel.sequence_parallel: between the tensor-parallel layers each rank of the tensor
  // group holds 1/tp of the tokens (sequence_parallel.h).
  bool sequence_parallel = false;
  // The backward split in two, as the zero-bubble schedules run it (backward_input, then
  // backward_weights): every layer with weights keeps copies of what its weights' gradients
  // are computed from (inputs and output gradients, a norm's statistics) a slot, the "weight
  // gradient inputs" arena.
  bool split_backward = false;
  // Pipeline parallelism: this rank's virtual stages, in model order. Empty: the whole model.
  std::vector<PipelineChunk> chunks;
  // Per chunk, the activation slots its own micro-batches take at once (pipeline_slots of its
  // steps), which may be fewer than the model's: a chunk of a V holds its activations from its
  // forward to its last backward pass only. Empty: the model's slots for every chunk.
  std::vector<int> chunk_slots;
  // The expert group each MoE layer's experts are split over and its tokens traded in (null:
  // the experts have no layout of their own, ep = 1 and etp = tp). Their parameters then sit
  // in the flat buffers' expert region, summed over the expert-data-parallel ranks.
  Communicator* expert = nullptr;
  // Context parallelism: the context group each sequence is split over (null: cp = 1).
  Communicator* context = nullptr;
  // parallel.etp=1 under tensor parallelism: every expert whole on each tensor rank, which
  // routes its own share of the tokens (sequence parallelism) through the expert group.
  bool whole_experts = false;
  // precision.dtype=fp8: the blocks' linear layers multiply in FP8 under this recipe
  // (trainer/precision/fp8_products.h); empty: in the compute dtype.
  std::optional<Fp8Recipe> fp8;

  int tp() const { return tensor ? tensor->size() : 1; }
  // The shares the tokens are cut into between the tensor-parallel layers.
  int sequence_parts() const { return sequence_parallel ? tp() : 1; }
  int tp_rank() const { return tensor ? tensor->rank() : 0; }
  int ep() const { return expert ? expert->size() : 1; }
  int cp() const { return context ? context->size() : 1; }
  int ep_rank() const { return expert ? expert->rank() : 0; }
  // The ranks each expert's hidden units split over: the tensor group's, or 1.
  int etp() const { return whole_experts ? 1 : tp(); }
  // A split of `parts` along dim over the tensor group, held by this rank.
  TensorSplit split(int dim, std::vector<int64_t> parts) const {
    return {dim, std::move(parts), tp_rank(), tp()};
  }
  // The same over the expert-tensor group: whole experts are not split.
  TensorSplit expert_split(int dim, std::vector<int64_t> parts) const {
    return whole_experts ? TensorSplit{dim, std::move(parts), 0, 1} : split(dim, std::move(parts));
  }
};

}  // namespace kiln
