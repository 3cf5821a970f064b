// The rotary embedding's inverse frequencies, one per pair of the dims RoPE turns (d:
// head_dim, or latent attention's qk_rope_head_dim): theta^(-2i/d), or
//  - model.rope_scaling=llama3, Llama 3.1's long-context version of them (as Hugging Face
//    computes it for rope_type "llama3"): the frequencies whose wavelength passes the original
//    context / low_freq_factor are divided by the factor, those below original /
//    high_freq_factor kept, and those between blended smoothly from one to the other;
//  - model.rope_scaling=yarn, YaRN's (Peng et al. 2023, as Hugging Face computes rope_type
//    "yarn"): the dims that turn fewer than beta_slow times over the original context are
//    interpolated (divided by the factor), those that turn more than beta_fast times kept,
//    with a linear ramp between (its ends rounded outwards); and its attention factor.
#pragma once

#include <vector>

#include "trainer/config/config.h"

namespace kiln {

std::vector<double> rope_inverse_frequencies(const ModelConfig& m);

// What the cos and sin of the table are multiplied by: YaRN's attention factor,
// mscale(factor, rope_mscale) / mscale(factor, rope_mscale_all_dim) (mscale(factor) alone
// when either is 0), with mscale(s, m) = 0.1 m ln(s) + 1 for s > 1; 1 otherwise.
double rope_attention_factor(const ModelConfig& m);

// What latent attention multiplies its softmax scale by: DeepSeek's mscale(factor,
// rope_mscale_all_dim)^2 under yarn with rope_mscale_all_dim > 0; 1 otherwise.
double latent_softmax_factor(const ModelConfig& m);

}  // namespace kiln
