#include "trainer/model/flops.h"

namespace kiln {

int64_t attention_parameter_count(const ModelConfig& m) {
  const bool llama = m.is_llama();
  const int64_t d = m.d_model, H = m.n_head;
  const auto linear = [&](int64_t in, int64_t out, bool bias) { return in * out + (bias ? out : 0); };
  if (!m.latent_attention()) {
    const int64_t width = H * m.head_dim(), qkv = (H + 2 * m.kv_heads()) * int64_t{m.head_dim()};
    return linear(d, qkv, m.has_qkv_bias()) + linear(width, d, !llama) + (m.qk_norm ? 2 * int64_t{m.head_dim()} : 0);
  }
  // Latent attention: the down-projection, the latents' norms, the up-projections (the
  // query's from x when q_lora_rank = 0), the output projection; no biases.
  const int64_t rq = m.q_lora_rank, rkv = m.kv_lora_rank, qk = H * m.head_dim();
  const int64_t q = rq > 0 ? rq + rq * qk : d * qk;
  return d * (rq + rkv + m.qk_rope_head_dim) + q + rkv + rkv * H * (m.qk_nope_head_dim + m.v_head_dim) +
         H * m.v_head_dim * d;
}

int64_t flops_parameter_count(const ModelConfig& m) {
  const bool llama = m.is_llama();
  const int64_t d = m.d_model, f = m.ffn_dim();
  const int64_t fc = llama ? 2 * f : f;  // SwiGLU's fc holds the gate and up halves
  // Each norm has a weight (and a bias on GPT-2); each linear a weight [out, in] (and a bias
  // [out] on GPT-2).
  const int64_t norm = llama ? d : 2 * d;
  const auto linear = [&](int64_t in, int64_t out) { return in * out + (llama ? 0 : out); };
  const int64_t attention = norm + attention_parameter_count(m) + norm;
  const int64_t dense_mlp = linear(d, fc) + linear(f, d);
  // An MoE layer's active parameters (Megatron's convention for MoE MFU): the router, the
  // top_k experts a token takes and the shared experts.
  const int64_t ef = m.expert_ffn_dim(), gated = llama ? 2 : 1;
  const int64_t expert = linear(d, gated * ef) + linear(ef, d);
  const int64_t shared = int64_t{m.moe.shared_experts} * ef;
  const int64_t moe_mlp = int64_t{m.moe.num_experts} * d + int64_t{m.moe.top_k} * expert +
                          (shared > 0 ? linear(d, gated * shared) + linear(shared, d) : 0);
  int64_t layers = 0;
  for (int l = 0; l < m.block_count(); ++l) layers += attention + (m.moe.is_moe_layer(l) ? moe_mlp : dense_mlp);
  const int64_t head = int64_t{m.vocab_size} * d;
  // Each multi-token prediction module besides its block (counted above): the projection of
  // [e | h], three norms, and the output layer once more.
  const int64_t modules = int64_t{m.mtp_depth} * (linear(2 * d, d) + 3 * norm + head);
  return layers + norm + head + modules;
}

int64_t model_flops_per_token(const ModelConfig& m) {
  // Q K^T over the query and key heads' width, P V over the value heads'.
  const int64_t scores = int64_t{m.n_head} * m.head_dim(), values = int64_t{m.n_head} * m.value_head_dim();
  return 6 * flops_parameter_count(m) + 6 * int64_t{m.block_count()} * (scores + values) * m.seq_len;
}

int64_t recomputed_flops_per_token(const ModelConfig& m) {
  const int64_t width = int64_t{m.n_head} * m.head_dim();
  return 2 * int64_t{m.block_count()} * width * m.seq_len;
}

double peak_bf16_flops(const std::string& device_name) {
  const auto has = [&](const char* s) { return device_name.find(s) != std::string::npos; };
  if (has("H100") || has("H200")) return has("PCIe") ? 756e12 : has("NVL") ? 835e12 : 989e12;
  if (has("A100")) return 312e12;
  return 0;
}

double utilisation(double tokens_per_s, int64_t flops_per_token, double peak_flops) {
  if (peak_flops <= 0) return 0;
  return tokens_per_s * static_cast<double>(flops_per_token) / peak_flops;
}

}  // namespace kiln
