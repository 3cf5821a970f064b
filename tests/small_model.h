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

}  // namespace kiln::test
