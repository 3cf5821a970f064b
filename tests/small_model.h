// A two-layer model of either architecture for tests: GPT-2 (MLP of 4 x d_model, output
// layer tied to the embedding) or Llama-style (two key/value heads for four query heads,
// SwiGLU of 1.5 x d_model, untied). A test sets on the result what it is about.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/config/config.h"

namespace kiln::test {

inline ModelConfig small_model(const std::string& arch, int d_model, int vocab_size,
                               int seq_len) {
  const bool llama = arch == "llama";
  ModelConfig m;
  m.arch = arch;
  m.n_layer = 2;
  m.n_head = 4;
  m.n_kv_head = llama ? 2 : 0;
  m.d_model = d_model;
  m.d_ff = llama ? d_model * 3 / 2 : 0;
  m.vocab_size = vocab_size;
  m.seq_len = seq_len;
  m.tie_embeddings = !llama;
  return m;
}

// DeepSeek's latent attention on a Llama model: query and key heads of nope + rope dims, value
// heads of `value`, latents of q_rank (0: the query projected straight from the input) and
// kv_rank; a key and value head for every query head.
inline void use_latent_attention(ModelConfig& m, int q_rank, int kv_rank, int nope, int rope, int value) {
  m.attention = "mla";
  m.n_kv_head = 0;
  m.q_lora_rank = q_rank;
  m.kv_lora_rank = kv_rank;
  m.qk_nope_head_dim = nope;
  m.qk_rope_head_dim = rope;
  m.v_head_dim = value;
}

// YaRN on a 16-token model: stretched 4x from a context of 4, the mscales apart so that the
// RoPE table's factor and latent attention's softmax factor both take part.
inline void use_short_yarn(ModelConfig& m) {
  m.rope_scaling = "yarn";
  m.rope_scaling_factor = 4;
  m.rope_original_seq_len = 4;
  m.rope_beta_fast = 4;
  m.rope_beta_slow = 0.5;
  m.rope_mscale = 1.0;
  m.rope_mscale_all_dim = 0.7;
}

// DeepSeek-V3's experts in small: `experts` sigmoid-scored experts of `width` in 4 groups, a
// token's 4 from its 2 best groups, 2 shared experts, gates scaled by 2.5, layer 0 dense.
inline void use_deepseek_experts(ModelConfig& m, int experts, int width) {
  MoeConfig& moe = m.moe;
  moe.num_experts = experts;
  moe.top_k = 4;
  moe.ffn_hidden = width;
  moe.shared_experts = 2;
  moe.dense_layers = 1;
  moe.score = "sigmoid";
  moe.route_groups = 4;
  moe.route_groups_topk = 2;
  moe.gate_scale = 2.5;
}

}  // namespace kiln::test
