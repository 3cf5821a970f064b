// Inference with a key/value cache. A GptDecoder runs a GptModel's parameters on the
// model's ops with buffers of its own, allocated once: a key and a value cache per layer
// sized for the model's context, and activations for one chunk of positions per sequence.
// A prompt goes through a chunk at a time, each generated token alone; every position's keys
// and values stay in the cache, so a new token costs one position's work plus attention over
// the positions before it, not a forward over the whole window.
//
// Positions are absolute, as in the full forward: the token at position i adds GPT-2's
// learned position i or turns by Llama's RoPE angle i. The decoder holds at most
// model.seq_len positions; what to do when they are used up is the caller's choice
// (trainer/train/generate.h slides by re-feeding the last half window).
//
// `batch` sequences advance in lockstep: every feed gives each the same number of tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/memory/arena.h"
#include "trainer/model/gpt_model.h"
#include "trainer/model/latent_decode.h"

namespace kiln {

class GptDecoder {
 public:
  GptDecoder(const GptModel& model, int64_t batch = 1, int64_t chunk = 64);

  // Forgets every position: the next feed starts again at position 0.
  void reset() { pos_ = 0; }
  // Feeds t tokens to each sequence (tokens[b * t + i]) at its next t positions; afterwards
  // logits() gives each sequence's last fed position.
  void feed(const int32_t* tokens, int64_t t);
  // The first vocab_size logits of sequence b's last fed position, as float.
  void logits(int64_t b, std::vector<float>& out) const;

  int64_t position() const { return pos_; }  // positions held per sequence
  int64_t capacity() const { return model_.config().seq_len; }
  size_t bytes() const { return arena_.bytes(); }

 private:
  // A LoRA adapter (lora_adapter.h) beside columns [first, first + B's rows) of a layer's
  // output.
  struct Adapter {
    Tensor a, b;
    int64_t first = 0;
  };
  // One layer's parameters (biases empty for Llama), its adapters under LoRA, and its caches.
  struct Layer {
    Tensor norm1_weight, norm1_bias, qkv_weight, qkv_bias, attn_proj_weight, attn_proj_bias;
    Tensor norm2_weight, norm2_bias, fc_weight, fc_bias, mlp_proj_weight, mlp_proj_bias;
    std::vector<Adapter> qkv_lora, attn_proj_lora, fc_lora, mlp_proj_lora;
    Tensor q_norm_weight, k_norm_weight;  // model.qk_norm's, else empty
    LatentDecodeWeights latent;           // model.attention=mla's, in place of the qkv and proj
    const MoeMlp* experts = nullptr;  // in an MoE layer, in place of the MLP
    Tensor k_cache, v_cache;  // [batch, seq_len, n_kv_head * head_dim] (latent_decode.h's row under mla)
  };

  void layout();
  void bind_parameters();
  // Runs t <= chunk positions per sequence whose tokens are already in tokens_.
  void forward_chunk(int64_t t);
  void norm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
            int64_t t) const;
  void linear(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<Adapter>& adapters = {}) const;
  // A multi-head attention layer's weights and adapters, under prefix n ("layers.0.").
  void bind_attention(Layer& l, const std::string& n) const;
  // The adapters of layer prefix `layer` (e.g. "layers.0.attn.qkv"), one per adapted part:
  // targets names each part's LoRA target, widths their output widths.
  std::vector<Adapter> adapters_of(const std::string& layer, const std::vector<int>& targets,
                                   const std::vector<int64_t>& widths) const;

  const GptModel& model_;
  Ops& ops_;
  int64_t batch_;
  int64_t chunk_;
  DType dtype_, stat_dtype_;
  AttentionShape heads_;
  Arena arena_{"decoder"};
  int64_t pos_ = 0;

  Tensor wte_, wpe_, final_norm_weight_, final_norm_bias_, head_;
  std::vector<Layer> layers_;
  // [batch, chunk, width] activations, seen packed as [batch, t, width] for a chunk of t.
  Tensor tokens_, x_, normed_, mean_, rstd_, qkv_, attn_, branch_, fc_, hidden_;
  Tensor lora_rank_, lora_part_;  // [batch, chunk, r] and as wide as the widest adapted output
  QkHeadRows qk_heads_;         // model.qk_norm: the heads' row moves for one chunk
  Tensor head_inputs_, head_rstd_;  // and what its forward saves, unread here
  ExpertBuffers expert_buffers_;  // shared by the MoE layers, which run one at a time
  LatentDecode latent_;           // model.attention=mla: its buffers, shared by the layers
  Tensor logits_;                 // [batch, padded vocab]: each sequence's last position
  std::vector<int32_t> staging_;  // the host side of one chunk of tokens
};

}  // namespace kiln
