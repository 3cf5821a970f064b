// Where a LoRA model's adapters (trainer/model/lora_adapter.h, docs/lora.md) sit, for
// `kiln export` and `kiln import`: each adapter's kiln parameters, the base weight it adapts
// and the rows of that weight its B covers, and the module PEFT names it by.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/config/config.h"
#include "trainer/config/lora_targets.h"

namespace kiln {

struct LoraSite {
  std::string adapter;   // kiln's prefix of its factors: adapter + ".lora_a" / ".lora_b"
  std::string weight;    // the base weight it adapts, e.g. layers.0.attn.qkv.weight
  int64_t first_row = 0;  // B's rows are rows [first_row, first_row + out) of the weight
  int64_t in = 0, out = 0;
  LoraTarget target = LoraTarget::Q;
  std::string module;     // PEFT's module: model.layers.0.self_attn.q_proj (empty for GPT-2)
};

// Every adapter of the model's LoRA config, layer by layer (none when LoRA is off).
std::vector<LoraSite> lora_sites(const ModelConfig& model);

// PEFT's target_modules name of a Llama-family target: q_proj ... down_proj.
std::string peft_module_name(LoraTarget target);

// The weight `weight` (row-major [rows, in], values as doubles) with each site on it merged
// in: rows [first_row, first_row + out) += scale B A. a and b: each site's factors, in the
// order of `sites`.
void merge_lora(std::vector<double>& weight, const std::vector<LoraSite>& sites,
                const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                double scale);

}  // namespace kiln
