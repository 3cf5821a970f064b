#include "trainer/optim/adamw.h"

#include <cmath>
#include <vector>

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

AdamW::AdamW(const TrainConfig& train, ParameterSet& params, Ops& ops)
    : train_(train), params_(params), ops_(ops) {
  const bool mixed = mixed_precision(params_.value_dtype());
  const Shape flat{params_.size()};
  const Shape table{static_cast<int64_t>(params_.all().size()), 3};
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) state_.allocate(ops_);
    if (mixed) master_ = state_.take(flat, params_.grad_dtype());
    m_ = state_.take(flat, params_.grad_dtype());
    v_ = state_.take(flat, params_.grad_dtype());
    segments_ = state_.take(table, DType::I64);
  }
  state_.check_complete();
  if (mixed) {
    ops_.cast(master_, params_.flat_values());
  } else {
    master_ = params_.flat_values();
  }
  std::vector<int64_t> rows;
  for (const Parameter& p : params_.all()) {
    rows.push_back(p.offset);
    rows.push_back(p.offset + p.value.numel());
    rows.push_back(p.decay ? 1 : 0);
  }
  ops_.copy_from_host(segments_, rows.data());
}

OptimizerStep AdamW::step(double lr, double loss_scale) {
  const Tensor grads = params_.flat_grads();
  const double sum_squares = ops_.sum_squares(grads);
  if (!std::isfinite(sum_squares)) return {sum_squares, true};
  OptimizerStep result;
  result.grad_norm = std::sqrt(sum_squares) / loss_scale;
  double factor = 1.0 / loss_scale;
  // PyTorch's clip_grad_norm_ rule, epsilon included, so the two clip identically.
  const double clip = train_.clip_grad / (result.grad_norm + 1e-6);
  if (train_.clip_grad > 0 && clip < 1.0) factor *= clip;
  if (factor != 1.0) ops_.scale(grads, factor);
  ++step_;
  const AdamWStep s{lr, train_.beta1, train_.beta2, train_.adam_eps, train_.weight_decay, step_};
  const bool mixed = master_.data != params_.flat_values().data;
  ops_.adamw(master_, grads, m_, v_, mixed ? params_.flat_values() : Tensor{}, segments_, s);
  return result;
}

}  // namespace kiln
