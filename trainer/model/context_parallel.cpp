#include "trainer/model/context_parallel.h"

#include <limits>
#include <utility>

namespace kiln {

std::vector<int32_t> context_tokens(int64_t seq_len, int cp, int rank) {
  const int64_t chunk = seq_len / (2 * cp);
  std::vector<int32_t> tokens;
  for (const int64_t c : {int64_t{rank}, int64_t{2 * cp - 1 - rank}})
    for (int64_t t = 0; t < chunk; ++t) tokens.push_back(static_cast<int32_t>(c * chunk + t));
  return tokens;
}

void ContextParallel::bind(const LayerBuild& build) {
  const ModelConfig& m = build.model;
  group_ = build.split.context;
  seq_len_ = m.seq_len;
  mine_ = context_tokens(seq_len_, group_->size(), group_->rank());
  const int64_t kv_width = 2 * int64_t{m.kv_heads() / build.split.tp()} * m.head_dim();
  for (int i = 0; i < 2; ++i) {
    kv_[i] = build.take(build.scratch, kv_width);
    dkv_[i] = build.take(build.scratch, kv_width);
  }
  tokens_.clear();
  for (int r = 0; r < group_->size(); ++r) tokens_.push_back(build.activations.take({build.seq()}, DType::I32));
}

void ContextParallel::fill_indices(Ops& ops) const {
  for (int r = 0; r < group_->size(); ++r)
    ops.copy_from_host(tokens_[static_cast<size_t>(r)], context_tokens(seq_len_, group_->size(), r).data());
}

void ContextParallel::attention_forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& lse,
                                        const Tensor& qkv, AttentionShape shape) const {
  const int cp = group_->size(), me = group_->rank();
  ops.fill(out, 0.0);
  ops.fill(lse, -std::numeric_limits<double>::infinity());
  Tensor block = batch.of(kv_[0]), next = batch.of(kv_[1]);
  ops.split_kv(block, qkv, shape);
  // Step s holds the block of rank me - s; the one after it arrives meanwhile.
  for (int step = 0; step < cp; ++step) {
    const int from = (me - step + cp) % cp;
    std::unique_ptr<PendingCollective> pass;
    if (step + 1 < cp) pass = group_->start_send_recv(block, (me + 1) % cp, next, (me + cp - 1) % cp);
    ops.ring_attention_forward(out, lse, qkv, block, tokens_[static_cast<size_t>(me)],
                               tokens_[static_cast<size_t>(from)], shape, batch.key_starts);
    if (pass) {
      pass->wait();
      std::swap(block, next);
    }
  }
}

void ContextParallel::attention_backward(Ops& ops, const Batch& batch, const Tensor& dqkv, const Tensor& dout,
                                         const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                         AttentionShape shape) const {
  const int cp = group_->size(), me = group_->rank(), after = (me + 1) % cp, before = (me + cp - 1) % cp;
  Tensor block = batch.of(kv_[0]), next = batch.of(kv_[1]);
  Tensor grad = batch.of(dkv_[0]), next_grad = batch.of(dkv_[1]);
  ops.fill(dqkv, 0.0);
  ops.split_kv(block, qkv, shape);
  ops.fill(grad, 0.0);
  // Step s holds rank me - s's block and the sum of its gradient over the ranks it has
  // visited; this rank adds its queries' part and passes both on. The last pass takes each
  // block's gradient home, whole.
  for (int step = 0; step < cp; ++step) {
    const int from = (me - step + cp) % cp;
    std::unique_ptr<PendingCollective> pass;
    if (step + 1 < cp) pass = group_->start_send_recv(block, after, next, before);
    ops.ring_attention_backward(dqkv, grad, dout, qkv, block, out, lse, tokens_[static_cast<size_t>(me)],
                                tokens_[static_cast<size_t>(from)], shape, batch.key_starts);
    group_->start_send_recv(grad, after, next_grad, before)->wait();
    std::swap(grad, next_grad);
    if (pass) {
      pass->wait();
      std::swap(block, next);
    }
  }
  ops.add_kv_gradient(dqkv, grad, shape);
}

}  // namespace kiln
