#include "trainer/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/check.h"

namespace kiln {

namespace {
bool mixed_precision(DType value_dtype) {
  return value_dtype == DType::BF16 || value_dtype == DType::F16;
}
}  // namespace

size_t AdamW::state_bytes_per_element(DType value_dtype) {
  return (mixed_precision(value_dtype) ? 3 : 2) * dtype_size(value_dtype == DType::F64 ? DType::F64
                                                                                       : DType::F32);
}

AdamW::AdamW(const TrainConfig& train, ParameterSet& params, Ops& ops, Communicator* shard_group,
             Communicator* tensor_group, Communicator* pipeline_group)
    : train_(train), params_(params), ops_(ops), group_(shard_group), tensor_group_(tensor_group),
      pipeline_group_(pipeline_group),
      shards_(shard_group ? shard_group->size() : 1),
      mixed_(mixed_precision(params.value_dtype())) {
  const int64_t n = params_.size();
  KILN_CHECK(n % shards_ == 0, "the flat parameter buffer of " + std::to_string(n) +
                                   " elements does not cut into " + std::to_string(shards_) +
                                   " shards");
  const int rank = shards_ > 1 ? group_->rank() : 0;
  begin_ = n / shards_ * rank;
  end_ = begin_ + n / shards_;
  const Shape shard{end_ - begin_};
  // The segment table covers the shard: each parameter's part of it, from the shard's start.
  // The first rank of a tensor group counts its pieces and the whole parameters every rank
  // of the group holds alike in the gradient norm; the others count their pieces alone.
  // Copies count on the stage that owns them.
  const bool first_of_group = !tensor_group_ || tensor_group_->rank() == 0;
  std::vector<int64_t> rows;
  for (const Parameter& p : params_.all()) {
    const int64_t first = std::max(p.offset, begin_);
    const int64_t last = std::min(p.offset + p.value.numel(), end_);
    if (first >= last) continue;
    rows.push_back(first - begin_);
    rows.push_back(last - begin_);
    rows.push_back(p.decay ? 1 : 0);
    const bool counts = !p.copy && (first_of_group || p.split.sharded());
    if (counts) norm_ranges_.emplace_back(first - begin_, last - begin_);
    norm_all_ = norm_all_ && counts;
  }
  const Shape table{std::max<int64_t>(1, static_cast<int64_t>(rows.size() / 3)), 3};
  if (rows.empty()) rows = {0, 0, 0};
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) state_.allocate(ops_);
    if (mixed_) master_ = state_.take(shard, params_.grad_dtype());
    m_ = state_.take(shard, params_.grad_dtype());
    v_ = state_.take(shard, params_.grad_dtype());
    if (sharded()) grad_shard_ = state_.take(shard, params_.grad_dtype());
    segments_ = state_.take(table, DType::I64);
  }
  state_.check_complete();
  const Tensor values = params_.flat_values().slice(begin_, end_);
  if (mixed_) {
    ops_.cast(master_, values);
  } else {
    master_ = values;
  }
  if (!sharded()) grad_shard_ = params_.flat_grads();
  ops_.copy_from_host(segments_, rows.data());
}

void AdamW::reduce_scatter_gradients() {
  KILN_CHECK(sharded(), "reduce_scatter_gradients needs a sharded optimizer");
  group_->reduce_scatter(grad_shard_, params_.flat_grads());
}

double AdamW::sum_squares(const Tensor& grads) {
  double sum = 0;
  if (norm_all_) {
    sum = ops_.sum_squares(grads);
  } else {
    for (const auto& [first, last] : norm_ranges_) sum += ops_.sum_squares(grads.slice(first, last));
  }
  const Tensor total{&sum, DType::F64, {1}};
  if (sharded()) group_->all_reduce(total, ReduceOp::Sum);
  if (tensor_group_ && tensor_group_->size() > 1) tensor_group_->all_reduce(total, ReduceOp::Sum);
  if (pipeline_group_ && pipeline_group_->size() > 1)
    pipeline_group_->all_reduce(total, ReduceOp::Sum);
  return sum;
}

OptimizerStep AdamW::step(double lr, double loss_scale) {
  const Tensor grads = grad_shard_;
  const double sum_squares = this->sum_squares(grads);
  if (!std::isfinite(sum_squares)) return {sum_squares, true};
  OptimizerStep result;
  result.grad_norm = std::sqrt(sum_squares) / loss_scale;
  double factor = 1.0 / loss_scale;
  // PyTorch's clip_grad_norm_ rule, epsilon included, so the two clip identically.
  const double clip = train_.clip_grad / (result.grad_norm + 1e-6);
  if (train_.clip_grad > 0 && clip < 1.0) factor *= clip;
  ++step_;
  const AdamWStep s{lr, train_.beta1, train_.beta2, train_.adam_eps, train_.weight_decay, step_, factor};
  const Tensor values = params_.flat_values();
  ops_.adamw(master_, grads, m_, v_, mixed_ ? values.slice(begin_, end_) : Tensor{}, segments_, s);
  // Every rank takes the others' updated shards; its own is already in place.
  if (sharded()) group_->all_gather(values, values.slice(begin_, end_));
  return result;
}

OptimizerState AdamW::whole_buffers() const {
  OptimizerState whole;
  whole.master_copy = mixed_;
  whole.memory = std::make_unique<Arena>("optimizer state");
  const Shape flat{params_.size()};
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) whole.memory->allocate(ops_);
    if (mixed_) whole.master = whole.memory->take(flat, params_.grad_dtype());
    whole.exp_avg = whole.memory->take(flat, params_.grad_dtype());
    whole.exp_avg_sq = whole.memory->take(flat, params_.grad_dtype());
  }
  if (!mixed_) whole.master = params_.flat_values();
  return whole;
}

OptimizerState AdamW::state_for_checkpoint() {
  if (!sharded()) return {master_, m_, v_, mixed_, nullptr};
  const bool root = group_->rank() == 0;
  OptimizerState whole = root ? whole_buffers() : OptimizerState{};
  group_->gather(whole.exp_avg, m_, 0);
  group_->gather(whole.exp_avg_sq, v_, 0);
  if (mixed_) group_->gather(whole.master, master_, 0);
  return whole;
}

OptimizerState AdamW::state_to_restore() {
  if (!sharded()) return {master_, m_, v_, mixed_, nullptr};
  return whole_buffers();
}

void AdamW::restored(const OptimizerState& state, int64_t steps) {
  step_ = steps;
  if (!sharded()) return;
  ops_.cast(m_, state.exp_avg.slice(begin_, end_));
  ops_.cast(v_, state.exp_avg_sq.slice(begin_, end_));
  if (mixed_) ops_.cast(master_, state.master.slice(begin_, end_));
}

}  // namespace kiln
