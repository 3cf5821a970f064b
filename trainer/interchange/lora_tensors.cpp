#include "trainer/interchange/lora_tensors.h"

namespace kiln {

std::string peft_module_name(LoraTarget target) { return lora_target_name(target) + "_proj"; }

std::vector<LoraSite> lora_sites(const ModelConfig& m) {
  std::vector<LoraSite> sites;
  if (!m.lora.enabled()) return sites;
  const int64_t C = m.d_model, F = m.ffn_dim(), Q = int64_t{m.n_head} * m.head_dim();
  const int64_t KV = int64_t{m.kv_heads()} * m.head_dim();
  for (int l = 0; l < m.n_layer; ++l) {
    const std::string k = "layers." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    // Each layer: its kiln name, its PEFT block, its parts (target, rows, input width).
    const auto add = [&](const std::string& layer, const std::string& block, LoraTarget target, int64_t first,
                         int64_t out, int64_t in) {
      if (!adapts(m, target)) return;
      sites.push_back({k + layer + "." + lora_target_name(target), k + layer + ".weight", first, in, out, target,
                       m.is_llama() ? h + block + peft_module_name(target) : std::string()});
    };
    add("attn.qkv", "self_attn.", LoraTarget::Q, 0, Q, C);
    add("attn.qkv", "self_attn.", LoraTarget::K, Q, KV, C);
    add("attn.qkv", "self_attn.", LoraTarget::V, Q + KV, KV, C);
    add("attn.proj", "self_attn.", LoraTarget::O, 0, C, Q);
    if (m.is_llama()) {
      add("mlp.fc", "mlp.", LoraTarget::Gate, 0, F, C);
      add("mlp.fc", "mlp.", LoraTarget::Up, F, F, C);
    } else {
      add("mlp.fc", "mlp.", LoraTarget::Fc, 0, F, C);
    }
    add("mlp.proj", "mlp.", LoraTarget::Down, 0, C, F);
  }
  return sites;
}

void merge_lora(std::vector<double>& weight, const std::vector<LoraSite>& sites,
                const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                double scale) {
  for (size_t s = 0; s < sites.size(); ++s) {
    const LoraSite& site = sites[s];
    const int64_t r = static_cast<int64_t>(b[s].size()) / site.out;
    for (int64_t i = 0; i < site.out; ++i) {
      double* row = weight.data() + (site.first_row + i) * site.in;
      for (int64_t k = 0; k < r; ++k) {
        const double bk = scale * b[s][static_cast<size_t>(i * r + k)];
        const double* ak = a[s].data() + k * site.in;
        for (int64_t c = 0; c < site.in; ++c) row[c] += bk * ak[c];
      }
    }
  }
}

}  // namespace kiln
