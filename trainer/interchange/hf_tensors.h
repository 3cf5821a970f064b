// Where kiln's parameters lie in Hugging Face's tensors (GPT2LMHeadModel, LlamaForCausalLM and
// the Qwen2, Qwen3 and Mistral classes that share its names, MixtralForCausalLM,
// Qwen3MoeForCausalLM, DeepseekV3ForCausalLM), for `kiln export` and `kiln import`;
// docs/interchange.md has the tables.
//
// A kiln tensor is one Hugging Face tensor or several stacked along its rows: Llama's fused
// qkv is q_proj, k_proj and v_proj; its fused [gate | up] is gate_proj and up_proj; Mixtral's
// experts' w1, w3 and w2 are rows of kiln's stacked experts. GPT-2's
// Conv1D layers store their weights [in, out], transposed from kiln's [out, in]; its c_attn
// already stacks q, k, v in kiln's order. Vocabulary padding rows exist only in kiln.
// RoPE needs no permutation: kiln and Hugging Face's Llama both rotate halves (i, i + d/2).
// DeepSeek's checkpoints turn interleaved pairs (2i, 2i + 1) instead (transformers' DeepseekV3
// with rope_interleave, its default): the rows that make a rotary part (each query head's last
// qk_rope_head_dim, the key's in kv_a_proj_with_mqa) are kept in that order in the file and in
// rotate-half's in kiln, which computes the same attention (both sides' pairs move alike).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/config/config.h"

namespace kiln {

struct HfPart {
  std::string name;       // the Hugging Face tensor
  int64_t row_begin = 0;  // the kiln rows it holds: [row_begin, row_end)
  int64_t row_end = 0;
  bool transposed = false;  // stored [in, out] (GPT-2's Conv1D)
  // Rotary rows interleaved in the file: the part's rows are blocks of rope_block, the last
  // rope_dims of each the file's pairs (2i, 2i + 1) that kiln keeps as (i, i + rope_dims / 2).
  // 0: the rows in kiln's order.
  int64_t rope_block = 0;
  int64_t rope_dims = 0;
};

struct HfTensor {
  std::string kiln_name;
  Shape kiln_shape;  // with the vocabulary padding rows
  std::vector<HfPart> parts;
  // A second place the file keeps a kiln tensor another entry maps (DeepSeek's multi-token
  // prediction layers keep the embedding and the output layer again): written on export; on
  // import checked to hold the same values, and not read.
  bool copy = false;
};

// Every kiln parameter of the model, in Hugging Face's order (embeddings, layers, final
// norm, output layer). The output layer is absent when tied to the embedding. A DeepseekV3
// file's multi-token prediction modules follow, as DeepSeek's checkpoints keep them.
// interleaved_rope: DeepseekV3's rotary rows in interleaved pairs in the file (its
// rope_interleave, which export writes true), else in kiln's rotate-half order.
std::vector<HfTensor> hf_tensor_map(const ModelConfig& model, bool interleaved_rope = true);

// DeepseekV3's e_score_correction_bias of each layer with experts, by layer: kiln keeps it as
// the checkpoint's selection bias (TrainingState::expert_bias), not as a parameter, and the
// file as F32 [n_routed_experts]. Empty for the other classes, whose routers have none.
std::map<int, std::string> hf_selection_bias_names(const ModelConfig& model);

// The shape of a part in the Hugging Face file.
Shape hf_shape(const HfTensor& tensor, const HfPart& part);

// Copies a part between a kiln tensor's bytes (kiln_shape, row-major) and the Hugging Face
// tensor's bytes (hf_shape), transposing Conv1D weights and ordering rotary rows as each side
// keeps them; `element` is the bytes per value.
void copy_part_out(const std::byte* kiln, const HfTensor& tensor, const HfPart& part,
                   size_t element, std::byte* out);
void copy_part_in(const std::byte* part_bytes, const HfTensor& tensor, const HfPart& part,
                  size_t element, std::byte* kiln);

}  // namespace kiln
