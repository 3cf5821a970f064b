#include "trainer/interchange/hf_tensors.h"

#include <cstring>
#include <utility>

#include "base/check.h"
#include "trainer/interchange/hf_config.h"
#include "trainer/interchange/hf_deepseek.h"

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
// projections. Mixtral names them block_sparse_moe.experts.e.w1, w3 and w2; Qwen3-MoE and
// DeepseekV3 mlp.experts.e.gate_proj, up_proj and down_proj, DeepseekV3's shared experts (one
// MLP as wide as all of them) mlp.shared_experts.gate_proj, up_proj and down_proj.
void sparse_experts(std::vector<HfTensor>& out, const ModelConfig& m, const std::string& k,
                    const std::string& layer) {
  const int64_t C = m.d_model, F = m.expert_ffn_dim(), E = m.moe.num_experts;
  const bool mixtral = !exports_as_qwen3_moe(m) && !exports_as_deepseek_v3(m);
  const std::string h = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  const std::string gate = mixtral ? "w1" : "gate_proj", up = mixtral ? "w3" : "up_proj", down = mixtral ? "w2" : "down_proj";
  if (m.moe.shared_experts > 0) {
    const int64_t S = int64_t{m.moe.shared_experts} * F;
    out.push_back({k + "shared.fc.weight",
                   {2 * S, C},
                   {{h + "shared_experts.gate_proj.weight", 0, S}, {h + "shared_experts.up_proj.weight", S, 2 * S}}});
    out.push_back(whole(k + "shared.proj.weight", {C, S}, h + "shared_experts.down_proj.weight"));
  }
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

// The second norm and the MLP of a Llama-style layer: the experts', or the dense SwiGLU's.
void llama_mlp(std::vector<HfTensor>& out, const ModelConfig& m, int layer, const std::string& k, const std::string& h) {
  const int64_t C = m.d_model, F = m.ffn_dim();
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

// DeepseekV3's latent attention. kiln's down-projection is q_a_proj's rows (when the query
// has a latent), then kv_a_proj_with_mqa's [key/value latent | rotary key]; the
// up-projections (q_b_proj, or q_proj without the query's latent, and kv_b_proj) are head by
// head, [nope | rope] and [key nope | value], on both sides. interleaved: the rotary rows are
// in pairs in the file (hf_tensors.h).
void latent_attention_parts(std::vector<HfTensor>& out, const ModelConfig& m, const std::string& k,
                            const std::string& h, bool interleaved) {
  const int64_t C = m.d_model, H = m.n_head, rq = m.q_lora_rank, rkv = m.kv_lora_rank;
  const int64_t dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim;
  const int64_t turned = interleaved ? dr : 0;
  const std::string a = h + "self_attn.";
  HfTensor down{k + "attn.down.weight", {rq + rkv + dr, C}, {}};
  if (rq > 0) down.parts.push_back({a + "q_a_proj.weight", 0, rq});
  down.parts.push_back({a + "kv_a_proj_with_mqa.weight", rq, rq + rkv + dr, false, rkv + dr, turned});
  out.push_back(std::move(down));
  if (rq > 0) {
    out.push_back(whole(k + "attn.q_norm.weight", {rq}, a + "q_a_layernorm.weight"));
    out.push_back({k + "attn.q_up.weight", {H * (dn + dr), rq}, {{a + "q_b_proj.weight", 0, H * (dn + dr), false, dn + dr, turned}}});
  } else {
    out.push_back({k + "attn.q.weight", {H * (dn + dr), C}, {{a + "q_proj.weight", 0, H * (dn + dr), false, dn + dr, turned}}});
  }
  out.push_back(whole(k + "attn.kv_norm.weight", {rkv}, a + "kv_a_layernorm.weight"));
  out.push_back(whole(k + "attn.kv_up.weight", {H * (dn + dv), rkv}, a + "kv_b_proj.weight"));
  out.push_back(whole(k + "attn.proj.weight", {C, H * dv}, a + "o_proj.weight"));
}

// Layer `layer` of the file (h: its prefix there) as kiln's block with prefix k: a layer's
// block, or a multi-token prediction module's.
void llama_layer(std::vector<HfTensor>& out, const ModelConfig& m, int layer, const std::string& k,
                 const std::string& h, bool interleaved) {
  const int64_t C = m.d_model, D = m.head_dim();
  const int64_t Q = m.n_head * D, KV = m.kv_heads() * D;
  out.push_back(whole(k + "norm1.weight", {C}, h + "input_layernorm.weight"));
  if (m.latent_attention()) {
    latent_attention_parts(out, m, k, h, interleaved);
    llama_mlp(out, m, layer, k, h);
    return;
  }
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
  llama_mlp(out, m, layer, k, h);
}

std::string file_layer(int layer) { return "model.layers." + std::to_string(layer) + "."; }

// DeepSeek's multi-token prediction module k as its checkpoints keep it: layer n_layer + k,
// its norms (enorm, hnorm, shared_head.norm), its eh_proj, its block, and copies of the
// embedding and the output layer, which kiln's modules share with the model.
void deepseek_prediction_layer(std::vector<HfTensor>& out, const ModelConfig& m, int k, bool interleaved) {
  const int64_t V = m.vocab_size, Vp = m.padded_vocab(), C = m.d_model;
  const int layer = m.n_layer + k;
  const std::string kp = "mtp." + std::to_string(k) + ".", h = file_layer(layer);
  HfTensor embedding = whole("wte", {Vp, C}, h + "embed_tokens.weight", V);
  embedding.copy = true;
  out.push_back(std::move(embedding));
  out.push_back(whole(kp + "enorm.weight", {C}, h + "enorm.weight"));
  out.push_back(whole(kp + "hnorm.weight", {C}, h + "hnorm.weight"));
  out.push_back(whole(kp + "eh_proj.weight", {C, 2 * C}, h + "eh_proj.weight"));
  llama_layer(out, m, layer, kp, h, interleaved);
  out.push_back(whole(kp + "final_norm.weight", {C}, h + "shared_head.norm.weight"));
  HfTensor head = whole(m.tie_embeddings ? "wte" : "lm_head.weight", {Vp, C}, h + "shared_head.head.weight", V);
  head.copy = true;
  out.push_back(std::move(head));
}

}  // namespace

std::vector<HfTensor> hf_tensor_map(const ModelConfig& m, bool interleaved_rope) {
  const int64_t V = m.vocab_size, Vp = m.padded_vocab(), C = m.d_model;
  std::vector<HfTensor> out;
  if (m.is_llama()) {
    out.push_back(whole("wte", {Vp, C}, "model.embed_tokens.weight", V));
    for (int l = 0; l < m.n_layer; ++l) llama_layer(out, m, l, "layers." + std::to_string(l) + ".", file_layer(l), interleaved_rope);
    out.push_back(whole("final_norm.weight", {C}, "model.norm.weight"));
  } else {
    out.push_back(whole("wte", {Vp, C}, "transformer.wte.weight", V));
    out.push_back(whole("wpe", {m.seq_len, C}, "transformer.wpe.weight"));
    for (int l = 0; l < m.n_layer; ++l) gpt2_layer(out, m, l);
    out.push_back(whole("final_norm.weight", {C}, "transformer.ln_f.weight"));
    out.push_back(whole("final_norm.bias", {C}, "transformer.ln_f.bias"));
  }
  if (!m.tie_embeddings) out.push_back(whole("lm_head.weight", {Vp, C}, "lm_head.weight", V));
  if (exports_as_deepseek_v3(m))
    for (int k = 0; k < m.mtp_depth; ++k) deepseek_prediction_layer(out, m, k, interleaved_rope);
  return out;
}

std::map<int, std::string> hf_selection_bias_names(const ModelConfig& m) {
  std::map<int, std::string> names;
  if (!exports_as_deepseek_v3(m)) return names;
  // The multi-token prediction modules' blocks too, as the file's layers past n_layer.
  for (int l = 0; l < m.block_count(); ++l)
    if (m.moe.is_moe_layer(l)) names[l] = file_layer(l) + "mlp.gate.e_score_correction_bias";
  return names;
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

// The kiln row (of the part's) that the file's row r holds: r itself, but in the rotary rows
// of a block, where the file's pair (2i, 2i + 1) is kiln's (i, i + rope_dims / 2).
int64_t kiln_row_of(const HfPart& p, int64_t r) {
  if (p.rope_dims == 0) return r;
  const int64_t block = r - r % p.rope_block, nope = p.rope_block - p.rope_dims, i = r % p.rope_block - nope;
  if (i < 0) return r;
  return block + nope + (i % 2) * (p.rope_dims / 2) + i / 2;
}

// A part's rotary rows tile it in whole blocks of whole pairs.
void check_rope_rows(const HfPart& p, int64_t rows) {
  KILN_CHECK(!p.transposed && p.rope_block > 0 && rows % p.rope_block == 0 && p.rope_dims % 2 == 0 &&
                 p.rope_dims <= p.rope_block,
             "interchange: the rotary rows of " + p.name + " do not tile it");
}
}  // namespace

void copy_part_out(const std::byte* kiln, const HfTensor& t, const HfPart& p, size_t element,
                   std::byte* out) {
  const auto [rows, cols] = span_of(t, p);
  const std::byte* src = kiln + static_cast<size_t>(p.row_begin * cols) * element;
  if (p.rope_dims > 0) {
    check_rope_rows(p, rows);
    const size_t row = static_cast<size_t>(cols) * element;
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out + static_cast<size_t>(r) * row, src + static_cast<size_t>(kiln_row_of(p, r)) * row, row);
    return;
  }
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
  if (p.rope_dims > 0) {
    check_rope_rows(p, rows);
    const size_t row = static_cast<size_t>(cols) * element;
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + static_cast<size_t>(kiln_row_of(p, r)) * row, part + static_cast<size_t>(r) * row, row);
    return;
  }
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
