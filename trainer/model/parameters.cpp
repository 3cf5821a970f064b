#include "trainer/model/parameters.h"

#include "kernels/check.h"

namespace kiln {

namespace {
// Every tensor starts on a multiple of 32 elements: 64-byte alignment in F16/BF16 and
// better in wider types, in both buffers at once.
constexpr int64_t kAlignElements = 32;
}  // namespace

ParameterSet::~ParameterSet() {
  if (owner_) {
    owner_->release(values_);
    owner_->release(grads_);
  }
}

void ParameterSet::begin_pass() {
  params_.clear();
  if (!owner_) size_ = 0;
  next_ = 0;
}

Parameter ParameterSet::add(const std::string& name, Shape shape, Init init, double std,
                            int64_t real_rows) {
  Parameter p;
  p.name = name;
  p.offset = (next_ + kAlignElements - 1) / kAlignElements * kAlignElements;
  next_ = p.offset + shape.numel();
  if (!owner_) size_ = next_;
  KILN_CHECK(next_ <= size_, "parameter layout grew after it was sized");
  p.value = {values_ ? static_cast<char*>(values_) + p.offset * dtype_size(value_dtype_) : nullptr,
             value_dtype_, shape, device_};
  p.grad = {grads_ ? static_cast<char*>(grads_) + p.offset * dtype_size(grad_dtype_) : nullptr,
            grad_dtype_, shape, device_};
  p.init = init;
  p.std = std;
  p.decay = shape.rank >= 2;
  p.real_rows = real_rows < 0 ? shape[0] : real_rows;
  params_.push_back(p);
  return p;
}

void ParameterSet::allocate(Ops& ops, int shards) {
  KILN_CHECK(owner_ == nullptr, "parameters allocated twice");
  // Each shard starts aligned too.
  const int64_t multiple = kAlignElements * shards;
  size_ = (next_ + multiple - 1) / multiple * multiple;
  owner_ = &ops;
  device_ = ops.device();
  values_ = ops.allocate(value_bytes());
  grads_ = ops.allocate(grad_bytes());
}

const Parameter& ParameterSet::find(const std::string& name) const {
  for (const Parameter& p : params_)
    if (p.name == name) return p;
  fail("no parameter named " + name);
}

int64_t ParameterSet::count() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += p.value.numel() / p.value.shape[0] * p.real_rows;
  return n;
}

}  // namespace kiln
