// Hugging Face's config.json for the models kiln trains: GPT2Config (GPT2LMHeadModel) for
// model.arch gpt2, LlamaConfig (LlamaForCausalLM) for llama, Qwen2Config and Qwen3Config for a
// llama with query, key and value biases or normalised heads, MixtralConfig
// (MixtralForCausalLM) for a llama with experts in every layer, Qwen3MoeConfig
// (Qwen3MoeForCausalLM) for one with normalised heads and experts, and DeepseekV3Config
// (DeepseekV3ForCausalLM, hf_deepseek.h) for one with latent attention. `kiln export` writes
// it, `kiln import` reads it back; docs/interchange.md lists the fields.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/tensor.h"
#include "trainer/config/config.h"

namespace kiln {

// The config.json of a kiln model whose weights are stored in `dtype`; eod is the
// tokenizer's end-of-document id (bos and eos). Refuses, in one line, a kiln model that
// the Hugging Face class cannot express (GPT-2 with grouped-query attention, a Mixtral with
// dense layers, an MoE model with shared experts or another router).
nlohmann::json hf_config(const ModelConfig& model, DType dtype, int32_t eod);

// Whether an MoE model is written as Qwen3MoeForCausalLM (its heads normalised), not as
// MixtralForCausalLM.
bool exports_as_qwen3_moe(const ModelConfig& model);

// The kiln model a config.json describes (`file` names it in errors). Refuses unknown model
// types and settings kiln does not compute the same way (another activation, rope_scaling,
// attention or MLP biases in Llama, ...), naming the field.
ModelConfig model_from_hf_config(const nlohmann::json& config, const std::string& file);

}  // namespace kiln
