// The linear layers a LoRA run adapts (finetune.lora.targets, docs/lora.md), by the names
// PEFT's target_modules give them in Llama-family models (q_proj -> q): q, k, v, o, gate, up,
// down; GPT-2's MLP has no gate and no separate up, so its two layers are fc and down.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace kiln {

enum class LoraTarget { Q, K, V, O, Gate, Up, Down, Fc };

// Every target's name, in LoraTarget's order.
const std::vector<std::string>& lora_target_names();
const std::string& lora_target_name(LoraTarget target);

// finetune.lora.targets parsed and checked against the model: each a known name the model
// has, each once, at least one. Throws a one-line "config: finetune.lora.targets ..." error.
std::vector<LoraTarget> parse_lora_targets(const std::string& text, const ModelConfig& model);

// Whether the model's LoRA config adapts `target` (false when LoRA is off).
bool adapts(const ModelConfig& model, LoraTarget target);
// The adapters' parameters in one layer of the model, whole (r times each adapted part's
// input and output widths); 0 without LoRA.
int64_t lora_layer_parameters(const ModelConfig& model);

// The target's name when the model adapts it, else empty: what a layer's bind takes.
std::string adapter_name(const ModelConfig& model, LoraTarget target);

}  // namespace kiln
