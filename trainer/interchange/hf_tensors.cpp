#include "trainer/interchange/hf_tensors.h"

#include <cstring>
#include <utility>

#include "trainer/interchange/hf_config.h"

namespace kiln {
namespace {

// One Hugging Face tensor holding the first `rows` rows of a kiln tensor.
HfTensor whole(const std::string& kiln_name, Shape kiln_shape, const std::string& hf_name,
               int64_t rows = -1, bool transposed = false) {
  return {kiln_name, kiln_shape, {{hf_name, 0, rows < 0 ? kiln_shape[0] : rows, transposed}}};
}

void gpt2_layer(std::vector<HfTensor>& out, const ModelConfig& m, int layer) {
  const std::string k = "layers." + std::to_string(layer) + ".";
  const std::string h = "transformer.h." + std::to_string(layer) + ".";
  const int64_t C = m.d_model, F = m.ffn_dim();
  const int64_t QKV = (m.n_head + 2 * m.kv_heads()) * m.head_dim();
  out.push_back(whole(k + "norm1.weight", {C}, h + "ln_1.weight"));
  out.push_back(whole(k + "norm1.bias", {C}, h + "ln_1.bias"));
  out.push_back(whole(k + "attn.qkv.weight", {QKV, C}, h + "attn.c_attn.weight", -1, true));
  out.push_back(whole(k + "attn.qkv.bias", {QKV}, h + "attn.c_attn.bias"));
  out.push_back(whole(k + "attn.proj.weight", {C, C}, h + "attn.c_proj.weight", -1, true));
  out.push_back(whole(k + "attn.proj.bias", {C}, h + "attn.c_proj.bias"));
  out.push_back(whole(k + "norm2.weight", {C}, h + "ln_2.weight"));
  out.push_back(whole(k + "norm2.bias", {C}, h + "ln_2.bias"));
  out.push_back(whole(k + "mlp.fc.weight", {F, C}, h + "mlp.c_fc.weight", -1, true));
  out.push_back(whole(k + "mlp.fc.bias", {F}, h + "mlp.c_fc.bias"));
  out.push_back(whole(k + "mlp.proj.weight", {C, F}, h + "mlp.c_proj.weight", -1, true));
  out.push_back(whole(k + "mlp.proj.bias", {C}, h + "mlp.c_proj.bias"));
}

// A sparse MLP's experts: the router is `gate`; expert e's gate and up products are its rows
// of kiln's stacked [gate | up] products, its down product its rows of the stacked
// projections. Mixtral names them block_sparse_moe.experts.e.w1, w3 and w2; Qwen3-MoE
// mlp.experts.e.gate_proj, up_proj and down_proj.
void sparse_experts(std::vector<HfTensor>& out, const ModelConfig& m, const std::string& k,
                    const std::string& layer) {
  const int64_t C = m.d_model, F = m.expert_ffn_dim(), E = m.moe.num_experts;
  const bool qwen3 = exports_as_qwen3_moe(m);
  const std::string h = layer + (qwen3 ? "mlp." : "block_sparse_moe.");
  const std::string gate = qwen3 ? "gate_proj" : "w1", up = qwen3 ? "up_proj" : "w3", down = qwen3 ? "down_proj" : "w2";
  out.push_back(whole(k + "router.weight", {E, C}, h + "gate.weight"));
  HfTensor fc{k + "experts.fc.weight", {E * 2 * F, C}, {}}, proj{k + "experts.proj.weight", {E * C, F}, {}};
  for (int64_t e = 0; e < E; ++e) {
    const std::string expert = h + "experts." + std::to_string(e) + ".";
    fc.parts.push_back({expert + gate + ".weight", e * 2 * F, e * 2 * F + F});
    fc.parts.push_back({expert + up + ".weight", e * 2 * F + F, (e + 1) * 2 * F});
    proj.parts.push_back({expert + down + ".weight", e * C, (e + 1) * C});
  }
  out.push_back(std::move(fc));
  out.push_back(std::move(proj));
}

void llama_layer(std::vector<HfTensor>& out, const ModelConfig& m, int layer) {
  const std::string k = "layers." + std::to_string(layer) + ".";
  const std::string h = "model.layers." + std::to_string(layer) + ".";
  const int64_t C = m.d_model, F = m.ffn_dim(), D = m.head_dim();
  const int64_t Q = m.n_head * D, KV = m.kv_heads() * D;
  out.push_back(whole(k + "norm1.weight", {C}, h + "input_layernorm.weight"));
  // kiln's fused rows: the query heads, then the key heads, then the value heads.
  const auto qkv_parts = [&](const std::string& kind) {
    return std::vector<HfPart>{{h + "self_attn.q_proj." + kind, 0, Q},
                               {h + "self_attn.k_proj." + kind, Q, Q + KV},
                               {h + "self_attn.v_proj." + kind, Q + KV, Q + 2 * KV}};
  };
  out.push_back({k + "attn.qkv.weight", {Q + 2 * KV, C}, qkv_parts("weight")});
  if (m.has_qkv_bias()) out.push_back({k + "attn.qkv.bias", {Q + 2 * KV}, qkv_parts("bias")});
  if (m.qk_norm) {
    out.push_back(whole(k + "attn.q_norm.weight", {D}, h + "self_attn.q_norm.weight"));
    out.push_back(whole(k + "attn.k_norm.weight", {D}, h + "self_attn.k_norm.weight"));
  }
  out.push_back(whole(k + "attn.proj.weight", {C, Q}, h + "self_attn.o_proj.weight"));
  out.push_back(whole(k + "norm2.weight", {C}, h + "post_attention_layernorm.weight"));
  if (m.moe.is_moe_layer(layer)) {
    sparse_experts(out, m, k + "moe.", h);
    return;
  }
  out.push_back({k + "mlp.fc.weight",
                 {2 * F, C},
                 {{h + "mlp.gate_proj.weight", 0, F}, {h + "mlp.up_proj.weight", F, 2 * F}}});
  out.push_back(whole(k + "mlp.proj.weight", {C, F}, h + "mlp.down_proj.weight"));
}

}  // namespace

std::vector<HfTensor> hf_tensor_map(const ModelConfig& m) {
  const int64_t V = m.vocab_size, Vp = m.padded_vocab(), C = m.d_model;
  std::vector<HfTensor> out;
  if (m.is_llama()) {
    out.push_back(whole("wte", {Vp, C}, "model.embed_tokens.weight", V));
    for (int l = 0; l < m.n_layer; ++l) llama_layer(out, m, l);
    out.push_back(whole("final_norm.weight", {C}, "model.norm.weight"));
  } else {
    out.push_back(whole("wte", {Vp, C}, "transformer.wte.weight", V));
    out.push_back(whole("wpe", {m.seq_len, C}, "transformer.wpe.weight"));
    for (int l = 0; l < m.n_layer; ++l) gpt2_layer(out, m, l);
    out.push_back(whole("final_norm.weight", {C}, "transformer.ln_f.weight"));
    out.push_back(whole("final_norm.bias", {C}, "transformer.ln_f.bias"));
  }
  if (!m.tie_embeddings) out.push_back(whole("lm_head.weight", {Vp, C}, "lm_head.weight", V));
  return out;
}

Shape hf_shape(const HfTensor& tensor, const HfPart& part) {
  const int64_t rows = part.row_end - part.row_begin;
  if (tensor.kiln_shape.rank == 1) return {rows};
  const int64_t cols = tensor.kiln_shape[1];
  return part.transposed ? Shape{cols, rows} : Shape{rows, cols};
}

namespace {
// Rows and columns of the kiln matrix a part covers (a 1-D tensor is one column).
struct Span2 {
  int64_t rows, cols;
};
Span2 span_of(const HfTensor& t, const HfPart& p) {
  return {p.row_end - p.row_begin, t.kiln_shape.rank == 1 ? 1 : t.kiln_shape[1]};
}
}  // namespace

void copy_part_out(const std::byte* kiln, const HfTensor& t, const HfPart& p, size_t element,
                   std::byte* out) {
  const auto [rows, cols] = span_of(t, p);
  const std::byte* src = kiln + static_cast<size_t>(p.row_begin * cols) * element;
  if (!p.transposed) {
    std::memcpy(out, src, static_cast<size_t>(rows * cols) * element);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(out + static_cast<size_t>(c * rows + r) * element,
                  src + static_cast<size_t>(r * cols + c) * element, element);
}

void copy_part_in(const std::byte* part, const HfTensor& t, const HfPart& p, size_t element,
                  std::byte* kiln) {
  const auto [rows, cols] = span_of(t, p);
  std::byte* dst = kiln + static_cast<size_t>(p.row_begin * cols) * element;
  if (!p.transposed) {
    std::memcpy(dst, part, static_cast<size_t>(rows * cols) * element);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(dst + static_cast<size_t>(r * cols + c) * element,
                  part + static_cast<size_t>(c * rows + r) * element, element);
}

}  // namespace kiln
