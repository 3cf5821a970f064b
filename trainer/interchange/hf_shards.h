// Hugging Face's sharded weights, as transformers' save_pretrained writes them (huggingface_hub's
// split_state_dict_into_shards): the tensors, in order, fill a file until the next would take it
// past the largest size, which starts another; a tensor larger than that size has a file of its
// own, placed when it comes. One file is model.safetensors; several are
// model-00001-of-0000N.safetensors, and model.safetensors.index.json names each tensor's file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/checkpoint/safetensors.h"

namespace kiln {

// transformers' default max_shard_size, "5GB".
inline constexpr int64_t kHfMaxShardBytes = 5'000'000'000;

// A size as transformers reads max_shard_size: a number and KB, MB, GB or TB (any case,
// powers of 1000, blanks around ignored), "5GB" or "0.5GB"; anything else, or not above zero,
// is refused in one line.
int64_t parse_shard_size(const std::string& text);

struct HfShard {
  std::string file;
  std::vector<size_t> tensors;  // indices into the tensors planned, in their order
};

// The files `tensors` are written to when none may pass max_bytes (but a tensor larger alone).
std::vector<HfShard> plan_hf_shards(const std::vector<TensorInfo>& tensors, int64_t max_bytes);

// model.safetensors.index.json for several shards, as transformers writes it: metadata's
// total_parameters (values) and total_size (bytes), and weight_map from each tensor to its
// file, keys sorted, indented by two, ending in a newline.
std::string hf_shard_index(const std::vector<TensorInfo>& tensors, const std::vector<HfShard>& shards);

}  // namespace kiln
