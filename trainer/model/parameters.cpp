#include "trainer/model/parameters.h"

#include "kernels/check.h"

namespace kiln {

Parameter ParameterSet::add(const std::string& name, Shape shape, Init init, double std,
                            int64_t real_rows) {
  Parameter p;
  p.name = name;
  p.value = values_.take(shape, dtype_);
  p.grad = grads_.take(shape, dtype_);
  p.init = init;
  p.std = std;
  p.decay = shape.rank >= 2;
  p.real_rows = real_rows < 0 ? shape[0] : real_rows;
  if (params_.empty()) {
    first_value_ = p.value;
    first_grad_ = p.grad;
  }
  params_.push_back(p);
  return p;
}

void ParameterSet::allocate(Ops& ops) {
  values_.allocate(ops);
  grads_.allocate(ops);
}

void ParameterSet::check_complete() const {
  values_.check_complete();
  grads_.check_complete();
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

Tensor ParameterSet::flat(Tensor first, const Arena& arena) const {
  Tensor t = first;
  t.shape = Shape{static_cast<int64_t>(arena.bytes() / dtype_size(dtype_))};
  return t;
}

}  // namespace kiln
