// GptModel's multi-token prediction (model.mtp_depth; multi_token_prediction.h): the modules
// run on the chunk with the output layer, after the main model's loss, and their backward
// before the main head's.
#include "base/check.h"
#include "trainer/memory/host_copy.h"
#include "trainer/model/gpt_model.h"
#include "trainer/model/sequence_parallel.h"

namespace kiln {

void GptModel::set_mtp_ids(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t, int slot,
                           const DocumentResets& resets) {
  const size_t s = static_cast<size_t>(slot);
  Slot& a = slot_[s];
  const Batch& batch = batch_[s];
  const int64_t n = b * t;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (size_t k = 0; k < mtp_.size(); ++k) {
    const int64_t ahead = static_cast<int64_t>(k) + 1;
    std::vector<int32_t>& labels = a.mtp_targets_host[k];
    labels.assign(static_cast<size_t>(n), -1);
    int64_t count = 0;
    for (int64_t row = 0; row < b; ++row) {
      for (int64_t i = 0; i < t; ++i) {
        const int64_t here = row * t + i, there = here + ahead;
        const bool inside = i + ahead < t &&
                            (!resets.attention_starts || resets.attention_starts[there] == resets.attention_starts[here]);
        // A position past the row reads token 0: its target is masked, and causal attention
        // keeps it from every position before it.
        ids[static_cast<size_t>(here)] = inside ? tokens[there] : 0;
        if (!inside || targets[there] < 0) continue;
        labels[static_cast<size_t>(here)] = targets[there];
        ++count;
      }
    }
    mtp_target_count_[s][k] = count;
    // Numbered as this rank's vocabulary slice numbers them.
    for (int64_t i = 0; i < n; ++i) {
      ids[static_cast<size_t>(i)] = local_token(ids[static_cast<size_t>(i)]);
      labels[static_cast<size_t>(i)] = local_target(labels[static_cast<size_t>(i)]);
    }
    ops_.copy_from_host(batch.of(a.mtp_tokens[k]), ids.data());
    ops_.copy_from_host(batch.of(a.mtp_targets[k]), labels.data());
  }
}

void GptModel::mtp_forward(int slot, int chunk) {
  const size_t s = static_cast<size_t>(slot);
  const Batch batch = chunk_batch(slot, chunk);
  const ChunkSlot& a = chunk_slot(slot, chunk);
  Tensor h = batch.share_of(a.final_norm_out);
  for (size_t k = 0; k < mtp_.size(); ++k) {
    const MtpSlot& m = a.mtp[k];
    const Tensor embedded = batch.share_of(m.embedded), out = batch.share_of(m.out);
    embed(batch, embedded, batch.of(slot_[s].mtp_tokens[k]), mtp_embedding_.value, Tensor{});
    mtp_[k].forward(ops_, batch, out, h, embedded, block_scratch_);
    lm_head_.forward(ops_, batch, batch.of(m.logits), out);
    mtp_loss_sum_[s][k] = cross_entropy_sum(batch, batch.of(m.losses), batch.of(m.lse), batch.of(m.logits),
                                            batch.of(slot_[s].mtp_targets[k]), slot_[s].mtp_targets_host[k]);
    h = out;
  }
}

Tensor GptModel::mtp_backward(int slot, int chunk, double dloss) {
  const size_t s = static_cast<size_t>(slot);
  const Batch batch = chunk_batch(slot, chunk);
  const ChunkSlot& a = chunk_slot(slot, chunk);
  // DeepSeek's L_MTP: each depth's summed loss weighted by mtp_loss_weight / D, over the same
  // count of targets as the main loss (dloss carries 1 / that count).
  const double weight = dloss * config_.mtp_loss_weight / static_cast<double>(mtp_.size());
  Tensor d_h = batch.share_of(mtp_d_h_), d_prev = batch.share_of(mtp_d_prev_);
  const Tensor d_e = batch.share_of(mtp_d_e_), d_head = batch.share_of(mtp_d_head_);
  ops_.fill(d_h, 0.0);  // the deepest h feeds no further module
  for (size_t k = mtp_.size(); k-- > 0;) {
    const MtpSlot& m = a.mtp[k];
    const Tensor logits = batch.of(m.logits), out = batch.share_of(m.out);
    const Tensor flat = logits.view({batch.b * batch.t, logits.shape.cols()});
    ops_.cross_entropy_backward(flat, flat, batch.of(m.lse), batch.of(slot_[s].mtp_targets[k]), local_vocab_, weight);
    lm_head_.backward(ops_, batch, d_head, logits, out);
    ops_.add(d_h, d_h, d_head);
    const Tensor h_prev = k > 0 ? batch.share_of(a.mtp[k - 1].out) : batch.share_of(a.final_norm_out);
    mtp_[k].backward(ops_, batch, d_prev, d_e, d_h, h_prev, batch.share_of(m.embedded), block_scratch_, dloss);
    // The embedding's rows take gradients from every token: gathered whole.
    const Tensor d_embedded = sequence_parallel() ? sequence_.gather_gradient(batch, d_e) : d_e;
    ops_.embedding_backward(mtp_embedding_.grad, Tensor{}, batch.of(slot_[s].mtp_tokens[k]), d_embedded,
                            batch.positions);
    std::swap(d_h, d_prev);
  }
  return d_h;
}

}  // namespace kiln
