#include "trainer/model/lora_adapter.h"

#include <algorithm>

#include "trainer/model/context_parallel.h"
#include "trainer/model/sequence_parallel.h"
#include "trainer/util/random.h"

namespace kiln {

namespace {
// The first rows x cols elements of a scratch buffer, as a matrix.
Tensor lora_leading(const Tensor& buffer, int64_t rows, int64_t cols) {
  return buffer.view({buffer.numel()}).slice(0, rows * cols).view({rows, cols});
}
}  // namespace

void LoraScratch::bind(const LayerBuild& build) {
  const ModelConfig& m = build.model;
  rank_a = build.take(build.scratch, m.lora.rank);
  rank_b = build.take(build.scratch, m.lora.rank);
  // The widest part of a fused layer on this rank: a query or a SwiGLU half.
  const int64_t widest_part = std::max<int64_t>(int64_t{m.n_head} * m.head_dim(), m.ffn_dim()) / build.split.tp();
  part = build.take(build.scratch, widest_part);
  // A column-parallel layer's whole input (d_model), or a row-parallel one's columns here,
  // which are the widest part's.
  if (m.lora.dropout > 0) dropped = build.take(build.scratch, std::max<int64_t>(m.d_model, widest_part));
}

void LoraAdapter::bind_column(const LayerBuild& build, const std::string& name, int64_t in, int64_t whole_width,
                              int64_t first) {
  const int r = build.model.lora.rank;
  column_ = true;
  first_ = first;
  b_ = build.params.add_adapter(name + ".lora_b", {whole_width / build.split.tp(), r}, Init::Zeros, 0,
                                build.split.split(0, {whole_width}));
  a_ = build.params.add_adapter(name + ".lora_a", {r, in}, Init::Normal, 1.0 / r);
  dropout_.first_feature = 0;
  dropout_.features = in;
  bind_buffers(build, name);
}

void LoraAdapter::bind_row(const LayerBuild& build, const std::string& name, int64_t in, int64_t out) {
  const int r = build.model.lora.rank;
  column_ = false;
  first_ = 0;
  b_ = build.params.add_adapter(name + ".lora_b", {out, r}, Init::Zeros, 0);
  a_ = build.params.add_adapter(name + ".lora_a", {r, in / build.split.tp()}, Init::Normal, 1.0 / r,
                                build.split.split(1, {in}));
  dropout_.first_feature = in / build.split.tp() * build.split.tp_rank();
  dropout_.features = in;
  bind_buffers(build, name);
}

void LoraAdapter::bind_buffers(const LayerBuild& build, const std::string& name) {
  scale_ = build.model.lora.scale();
  dropout_.p = build.model.lora.dropout;
  dropout_.stream = stable_hash(name + ".lora_dropout");
  dropout_.seq_len = build.model.seq_len;
  // Under context parallelism a sequence's tokens here are two runs of the whole sequence's.
  context_runs_ = build.context != nullptr;
  if (build.context) {
    const std::vector<int32_t>& mine = build.context->tokens();
    dropout_.run = static_cast<int64_t>(mine.size()) / 2;
    dropout_.starts[0] = mine.front();
    dropout_.starts[1] = mine[static_cast<size_t>(dropout_.run)];
  }
  group_ = build.split.tensor;
  sequence_ = build.sequence;
  scratch_ = build.lora;
  u_.clear();
  for (int s = 0; s < build.slots; ++s) u_.push_back(build.take(build.activations, build.model.lora.rank));
}

DropoutMask LoraAdapter::mask(const Batch& batch) const {
  DropoutMask m = dropout_;
  m.seed = batch.dropout.seed;
  m.first_sample = batch.dropout.first_sample;
  m.tokens = batch.t;
  if (!context_runs_) m.run = batch.t;  // one run: the batch's whole sequences
  return m;
}

Tensor LoraAdapter::input(Ops& ops, const Batch& batch, const Tensor& x) const {
  const Tensor whole = as_matrix(x);
  if (!drops(batch)) return whole;
  const Tensor dropped = lora_leading(scratch_->dropped, whole.shape.rows(), whole.shape.cols());
  ops.dropout(dropped, whole, mask(batch), false);
  return dropped;
}

void LoraAdapter::forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const {
  const Tensor u = as_matrix(batch.of(u_[static_cast<size_t>(batch.slot)]));
  const Tensor t = as_matrix(batch.of(scratch_->rank_a));
  ops.matmul(t, input(ops, batch, x), false, a_.value, true, false);
  // Beside a row-parallel layer each rank's product sums its own input columns.
  if (!column_ && group_ && group_->size() > 1) group_->all_reduce(t, ReduceOp::Sum);
  ops.take_columns(u, t, 0, scale_);
  const Tensor out = as_matrix(y);
  const int64_t width = b_.value.shape[0];
  if (!column_) {
    // Under sequence parallelism y is this rank's token share: its rows of u.
    const int64_t n = u.shape[0], parts = sequence_ ? batch.parts : 1, rank = sequence_ ? sequence_->group().rank() : 0;
    ops.matmul(out, u.slice(n / parts * rank, n / parts * (rank + 1)), false, b_.value, true, true);
  } else if (first_ == 0 && width == out.shape.cols()) {
    ops.matmul(out, u, false, b_.value, true, true);
  } else {
    const Tensor part = lora_leading(scratch_->part, u.shape[0], width);
    ops.matmul(part, u, false, b_.value, true, false);
    ops.add_columns(out, part, first_, 1.0);
  }
}

void LoraAdapter::backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x) const {
  const Tensor u = as_matrix(batch.of(u_[static_cast<size_t>(batch.slot)]));
  const int64_t n = u.shape[0], width = b_.value.shape[0];
  Tensor g = as_matrix(dy);
  if (first_ != 0 || width != g.shape.cols()) {
    g = lora_leading(scratch_->part, n, width);
    ops.take_columns(g, as_matrix(dy), first_, 1.0);
  }
  ops.matmul(b_.grad, g, true, u, false, true);  // dB += dy^T (scale x A^T)
  const Tensor t = as_matrix(batch.of(scratch_->rank_a));
  const Tensor du = as_matrix(batch.of(scratch_->rank_b));
  ops.matmul(t, g, false, b_.value, false, false);
  ops.take_columns(du, t, 0, scale_);  // du = scale dy B, the gradient of x A^T
  if (!dx.empty() && drops(batch)) {
    // The gradient of dropout(x) is du A, masked as forward's x was.
    const Tensor dropped = lora_leading(scratch_->dropped, n, a_.value.shape[1]);
    ops.matmul(dropped, du, false, a_.value, false, false);
    ops.dropout(as_matrix(dx), dropped, mask(batch), true);
  } else if (!dx.empty()) {
    ops.matmul(as_matrix(dx), du, false, a_.value, false, true);
  }
  if (column_ && group_ && group_->size() > 1) group_->all_reduce(du, ReduceOp::Sum);
  ops.matmul(a_.grad, du, true, input(ops, batch, x), false, true);
}

}  // namespace kiln
