#include "trainer/model/gpt_decoder.h"

#include <algorithm>
#include <string>

#include "base/check.h"
#include "trainer/config/lora_targets.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/layer_build.h"

namespace kiln {

GptDecoder::GptDecoder(const GptModel& model, int64_t batch, int64_t chunk)
    : model_(model),
      ops_(model.ops()),
      batch_(batch),
      chunk_(std::clamp<int64_t>(chunk, 1, model.config().seq_len)),
      dtype_(model.parameters().value_dtype()),
      stat_dtype_(dtype_ == DType::F64 ? DType::F64 : DType::F32) {
  KILN_CHECK(batch_ >= 1, "decoder: batch must be at least 1");
  const ModelConfig& m = model_.config();
  heads_ = m.latent_attention() ? LatentDecode::heads(m) : AttentionShape{m.n_head, m.kv_heads(), m.head_dim()};
  layers_.assign(static_cast<size_t>(m.n_layer), Layer{});
  // First pass learns the size, second hands out memory.
  layout();
  arena_.allocate(ops_);
  layout();
  arena_.check_complete();
  if (m.qk_norm) qk_heads_.fill(ops_);
  bind_parameters();
  staging_.resize(static_cast<size_t>(batch_ * chunk_));
}

void GptDecoder::layout() {
  const ModelConfig& m = model_.config();
  const int64_t B = batch_, R = chunk_, C = m.d_model, F = m.ffn_dim();
  tokens_ = arena_.take({B, R}, DType::I32);
  x_ = arena_.take({B, R, C}, dtype_);
  normed_ = arena_.take({B, R, C}, dtype_);
  mean_ = arena_.take({B, R}, stat_dtype_);
  rstd_ = arena_.take({B, R}, stat_dtype_);
  qkv_ = arena_.take({B, R, heads_.qkv_width()}, dtype_);
  attn_ = arena_.take({B, R, int64_t{heads_.n_head} * heads_.head_dim}, dtype_);
  branch_ = arena_.take({B, R, C}, dtype_);
  fc_ = arena_.take({B, R, m.is_llama() ? 2 * F : F}, dtype_);
  hidden_ = arena_.take({B, R, F}, dtype_);
  logits_ = arena_.take({B, m.padded_vocab()}, dtype_);
  if (m.moe.enabled()) expert_buffers_ = ExpertBuffers::take(arena_, m, B * R, dtype_, stat_dtype_);
  if (m.latent_attention()) latent_.take(arena_, m, B, R, dtype_, stat_dtype_);
  if (m.lora.enabled()) {
    lora_rank_ = arena_.take({B, R, m.lora.rank}, dtype_);
    lora_part_ = arena_.take({B, R, std::max<int64_t>({C, heads_.qkv_width(), 2 * F})}, dtype_);
  }
  if (m.qk_norm) {
    qk_heads_.take(arena_, arena_, B * R, heads_, dtype_);
    head_inputs_ = qk_heads_.take_heads(arena_, dtype_);
    head_rstd_ = qk_heads_.take_rstd(arena_, stat_dtype_);
  }
  const int64_t kv_width = static_cast<int64_t>(heads_.n_kv_head) * heads_.head_dim;
  for (Layer& l : layers_) {
    l.k_cache = arena_.take({B, m.seq_len, kv_width}, dtype_);
    l.v_cache = arena_.take({B, m.seq_len, kv_width}, dtype_);
  }
}

void GptDecoder::bind_parameters() {
  const ModelConfig& m = model_.config();
  const ParameterSet& p = model_.parameters();
  const bool bias = !m.is_llama();
  const auto weight = [&](const std::string& name) { return p.find(name).value; };
  const auto bias_of = [&](const std::string& name) {
    return bias ? p.find(name + ".bias").value : Tensor{};
  };
  wte_ = weight("wte");
  if (!m.is_llama()) wpe_ = weight("wpe");
  final_norm_weight_ = weight("final_norm.weight");
  final_norm_bias_ = bias_of("final_norm");
  head_ = m.tie_embeddings ? wte_ : weight("lm_head.weight");
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string n = "layers." + std::to_string(i) + ".";
    Layer& l = layers_[i];
    l.norm1_weight = weight(n + "norm1.weight");
    l.norm1_bias = bias_of(n + "norm1");
    l.norm2_weight = weight(n + "norm2.weight");
    l.norm2_bias = bias_of(n + "norm2");
    if (m.latent_attention()) {
      const bool q_latent = m.q_lora_rank > 0;
      l.latent = {weight(n + "attn.down.weight"),
                  q_latent ? weight(n + "attn.q_norm.weight") : Tensor{},
                  q_latent ? weight(n + "attn.q_up.weight") : Tensor{},
                  q_latent ? Tensor{} : weight(n + "attn.q.weight"),
                  weight(n + "attn.kv_norm.weight"),
                  weight(n + "attn.kv_up.weight"),
                  weight(n + "attn.proj.weight")};
    } else {
      bind_attention(l, n);
    }
    l.experts = model_.experts(static_cast<int>(i));
    if (l.experts) continue;
    l.fc_weight = weight(n + "mlp.fc.weight");
    l.fc_bias = bias_of(n + "mlp.fc");
    l.mlp_proj_weight = weight(n + "mlp.proj.weight");
    l.mlp_proj_bias = bias_of(n + "mlp.proj");
    const int64_t F = m.ffn_dim();
    l.fc_lora = m.is_llama() ? adapters_of(n + "mlp.fc", {static_cast<int>(LoraTarget::Gate),
                                                          static_cast<int>(LoraTarget::Up)}, {F, F})
                             : adapters_of(n + "mlp.fc", {static_cast<int>(LoraTarget::Fc)}, {F});
    l.mlp_proj_lora = adapters_of(n + "mlp.proj", {static_cast<int>(LoraTarget::Down)}, {m.d_model});
  }
}

void GptDecoder::bind_attention(Layer& l, const std::string& n) const {
  const ModelConfig& m = model_.config();
  const ParameterSet& p = model_.parameters();
  const auto weight = [&](const std::string& name) { return p.find(name).value; };
  l.qkv_weight = weight(n + "attn.qkv.weight");
  l.qkv_bias = m.has_qkv_bias() ? weight(n + "attn.qkv.bias") : Tensor{};
  l.attn_proj_weight = weight(n + "attn.proj.weight");
  l.attn_proj_bias = m.is_llama() ? Tensor{} : weight(n + "attn.proj.bias");
  if (m.qk_norm) {
    l.q_norm_weight = weight(n + "attn.q_norm.weight");
    l.k_norm_weight = weight(n + "attn.k_norm.weight");
  }
  const int64_t q_width = int64_t{m.n_head} * m.head_dim(), kv_width = int64_t{m.kv_heads()} * m.head_dim();
  l.qkv_lora = adapters_of(n + "attn.qkv", {static_cast<int>(LoraTarget::Q), static_cast<int>(LoraTarget::K),
                                            static_cast<int>(LoraTarget::V)},
                           {q_width, kv_width, kv_width});
  l.attn_proj_lora = adapters_of(n + "attn.proj", {static_cast<int>(LoraTarget::O)}, {m.d_model});
}

std::vector<GptDecoder::Adapter> GptDecoder::adapters_of(const std::string& layer, const std::vector<int>& targets,
                                                         const std::vector<int64_t>& widths) const {
  std::vector<Adapter> adapters;
  int64_t first = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto target = static_cast<LoraTarget>(targets[i]);
    if (adapts(model_.config(), target)) {
      const std::string name = layer + "." + lora_target_name(target);
      adapters.push_back({model_.parameters().find(name + ".lora_a").value,
                          model_.parameters().find(name + ".lora_b").value, first});
    }
    first += widths[i];
  }
  return adapters;
}

void GptDecoder::feed(const int32_t* tokens, int64_t t) {
  const ModelConfig& m = model_.config();
  KILN_CHECK(t >= 1 && pos_ + t <= m.seq_len,
             "decoder: positions " + std::to_string(pos_) + ".." + std::to_string(pos_ + t) +
                 " do not fit the context of model.seq_len=" + std::to_string(m.seq_len));
  for (int64_t done = 0; done < t;) {
    const int64_t n = std::min(chunk_, t - done);
    for (int64_t b = 0; b < batch_; ++b) {
      for (int64_t i = 0; i < n; ++i) {
        const int32_t id = tokens[b * t + done + i];
        KILN_CHECK(id >= 0 && id < m.vocab_size,
                   "token id " + std::to_string(id) +
                       " is outside model.vocab_size=" + std::to_string(m.vocab_size));
        staging_[static_cast<size_t>(b * n + i)] = id;
      }
    }
    ops_.copy_from_host(Batch{batch_, n}.of(tokens_), staging_.data());
    forward_chunk(n);
    done += n;
  }
}

void GptDecoder::forward_chunk(int64_t t) {
  const ModelConfig& m = model_.config();
  const Batch chunk{batch_, t};
  const Tensor x = chunk.of(x_), normed = chunk.of(normed_), qkv = chunk.of(qkv_);
  const Tensor attn = chunk.of(attn_), branch = chunk.of(branch_);
  const Tensor fc = chunk.of(fc_), hidden = chunk.of(hidden_);
  ops_.embedding_forward(x, chunk.of(tokens_), wte_,
                         m.is_llama() ? Tensor{} : wpe_.slice(pos_, pos_ + t), Tensor{});
  for (const Layer& l : layers_) {
    norm(normed, x, l.norm1_weight, l.norm1_bias, t);
    const Tensor rope = m.is_llama() ? model_.rope_table().slice(pos_, pos_ + t) : Tensor{};
    if (m.latent_attention()) {
      latent_.forward(ops_, l.latent, branch, normed, qkv, attn, rope, l.k_cache, l.v_cache, pos_);
    } else {
      if (m.qk_norm) {
        linear(qk_heads_.fused(chunk), normed, l.qkv_weight, l.qkv_bias, l.qkv_lora);
        qk_heads_.forward(ops_, chunk, qkv, head_inputs_, head_rstd_, l.q_norm_weight, l.k_norm_weight, m.norm_eps);
      } else {
        linear(qkv, normed, l.qkv_weight, l.qkv_bias, l.qkv_lora);
      }
      if (m.is_llama()) ops_.rope_forward(qkv, rope, heads_, Tensor{});
      ops_.attention_decode(attn, l.k_cache, l.v_cache, qkv, pos_, heads_);
      linear(branch, attn, l.attn_proj_weight, l.attn_proj_bias, l.attn_proj_lora);
    }
    ops_.add(x, x, branch);
    norm(normed, x, l.norm2_weight, l.norm2_bias, t);
    if (l.experts) {
      l.experts->infer(ops_, branch, normed, expert_buffers_);
    } else {
      linear(fc, normed, l.fc_weight, l.fc_bias, l.fc_lora);
      if (m.is_llama()) {
        ops_.swiglu_forward(hidden, fc);
      } else {
        ops_.gelu_forward(hidden, fc);
      }
      linear(branch, hidden, l.mlp_proj_weight, l.mlp_proj_bias, l.mlp_proj_lora);
    }
    ops_.add(x, x, branch);
  }
  // Only each sequence's last position needs logits: the output layer runs on those rows.
  norm(normed, x, final_norm_weight_, final_norm_bias_, t);
  const Tensor rows = as_matrix(normed);
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t last = b * t + t - 1;
    ops_.matmul(logits_.slice(b, b + 1), rows.slice(last, last + 1), false, head_, true, false);
  }
  pos_ += t;
}

void GptDecoder::norm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                      int64_t t) const {
  const Batch chunk{batch_, t};
  if (model_.config().is_llama()) {
    ops_.rmsnorm_forward(out, chunk.of(rstd_), x, weight, model_.config().norm_eps);
  } else {
    ops_.layernorm_forward(out, chunk.of(mean_), chunk.of(rstd_), x, weight, bias,
                           model_.config().norm_eps);
  }
}

void GptDecoder::linear(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const std::vector<Adapter>& adapters) const {
  ops_.matmul(as_matrix(y), as_matrix(x), false, weight, true, false);
  if (!bias.empty()) ops_.add_bias(as_matrix(y), bias);
  // Each adapter adds scale (x A^T) B^T to its columns.
  const int64_t n = as_matrix(x).shape[0];
  for (const Adapter& adapter : adapters) {
    const Tensor u = lora_rank_.view({lora_rank_.numel()}).slice(0, n * adapter.a.shape[0]).view({n, adapter.a.shape[0]});
    const Tensor part = lora_part_.view({lora_part_.numel()}).slice(0, n * adapter.b.shape[0]).view({n, adapter.b.shape[0]});
    ops_.matmul(u, as_matrix(x), false, adapter.a, true, false);
    ops_.matmul(part, u, false, adapter.b, true, false);
    ops_.add_columns(as_matrix(y), part, adapter.first, model_.config().lora.scale());
  }
}

void GptDecoder::logits(int64_t b, std::vector<float>& out) const {
  KILN_CHECK(pos_ > 0 && b >= 0 && b < batch_, "decoder: no logits before the first feed");
  const std::vector<double> row = copy_to_doubles(ops_, logits_.slice(b, b + 1));
  out.assign(row.begin(), row.begin() + model_.config().vocab_size);
}

}  // namespace kiln
