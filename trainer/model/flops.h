// Model FLOPs and utilisation, in PaLM's convention (Chowdhery et al. 2022, appendix B), so
// kiln's figures compare with Megatron's and PyTorch's:
//
//   model FLOPs per token = 6 N + 12 L d s
//
// N counts every parameter except the token and position embeddings, and counts the output
// head [vocab_size, d_model] even when it is tied to the token embedding (its product is
// done either way); the vocabulary padding is not counted. L layers, d the attention width
// (n_head x head_dim), s the sequence length. 6 N is the forward (2 N) and backward (4 N) of
// every weight's product; 12 L d s is the attention scores Q K^T and their use P V, forward
// and backward, without halving for the causal mask. Under latent attention (model.attention=
// mla) N counts its own projections and norms, and the attention term is 6 L s (dq + dv),
// dq = n_head (qk_nope_head_dim + qk_rope_head_dim) for Q K^T and dv = n_head v_head_dim for
// P V: the model's FLOPs, not the zero padding kiln's core multiplies its value heads by.
// Multi-token prediction (model.mtp_depth = D) adds D layers to L and, per module, its
// projection [d, 2 d], three norms and one more output head to N: a token's work at every depth.
//
// MFU = tokens/s x model FLOPs per token / the device's dense BF16 peak. HFU adds the work
// done again: a flash-style attention backward rebuilds the scores Q K^T from the saved
// log-sum-exp instead of storing them (2 L d s per token). kiln checkpoints no other
// activations, so that is all HFU adds.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/config/config.h"

namespace kiln {

// The parameters of one layer's attention, norms aside (its projections, their biases, the
// head norms or the latents' norms): multi-head or latent, as model.attention says.
int64_t attention_parameter_count(const ModelConfig& m);
// N above: the parameters whose products every token pays for.
int64_t flops_parameter_count(const ModelConfig& m);
// 6 N + 12 L d s.
int64_t model_flops_per_token(const ModelConfig& m);
// Work done again, beyond the model FLOPs: 2 L d s (attention scores rebuilt in backward).
int64_t recomputed_flops_per_token(const ModelConfig& m);

// Dense BF16 peak FLOP/s of the GPU whose name contains a known model ("NVIDIA H100 80GB
// HBM3", or an op backend's name such as "cuda:0 (NVIDIA H100 80GB HBM3)"); 0 when unknown.
// H100 SXM and H200: 989e12; H100 PCIe: 756e12; H100/H200 NVL: 835e12; A100: 312e12.
double peak_bf16_flops(const std::string& device_name);

// Achieved FLOP/s over peak, a fraction; 0 when the peak is unknown (0).
double utilisation(double tokens_per_s, int64_t flops_per_token, double peak_flops);

}  // namespace kiln
