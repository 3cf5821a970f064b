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

}  // namespace kiln::test
