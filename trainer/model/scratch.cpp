#include "trainer/model/scratch.h"

namespace kiln {

void BlockScratch::bind(const LayerBuild& build) {
  // Widths of this tensor-parallel rank's heads and hidden units.
  const ModelConfig& m = build.model;
  const int tp = build.split.tp();
  const int64_t qkv_width = (m.n_head + 2 * m.kv_heads()) / tp * m.head_dim();
  const int64_t ffn = m.ffn_dim() / tp;
  const int64_t fc_width = m.is_llama() ? 2 * ffn : ffn;
  branch_out = build.take_share(build.scratch, m.d_model);
  d_norm_out = build.take_share(build.scratch, m.d_model);
  d_attn = build.take(build.scratch, int64_t{m.n_head} / tp * m.head_dim());
  d_qkv = build.take(build.scratch, qkv_width);
  d_hidden = build.take(build.scratch, ffn);
  d_fc = build.take(build.scratch, fc_width);
  if (m.latent_attention()) latent.bind(build);
  if (m.moe.enabled())
    experts = ExpertGradients::take(build.scratch, m, build.micro_batch * m.seq_len, build.dtype,
                                    build.stat_dtype, build.split.ep(), build.split.etp(),
                                    build.split.tp());
}

}  // namespace kiln
