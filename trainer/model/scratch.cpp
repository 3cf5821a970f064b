#include "trainer/model/scratch.h"

namespace kiln {

void BlockScratch::bind(const LayerBuild& build) {
  const ModelConfig& m = build.model;
  const int64_t qkv_width = (m.n_head + 2 * m.kv_heads()) * m.head_dim();
  const int64_t fc_width = m.is_llama() ? 2 * m.ffn_dim() : m.ffn_dim();
  branch_out = build.take(build.scratch, m.d_model);
  d_norm_out = build.take(build.scratch, m.d_model);
  d_attn = build.take(build.scratch, static_cast<int64_t>(m.n_head) * m.head_dim());
  d_qkv = build.take(build.scratch, qkv_width);
  d_hidden = build.take(build.scratch, m.ffn_dim());
  d_fc = build.take(build.scratch, fc_width);
}

}  // namespace kiln
