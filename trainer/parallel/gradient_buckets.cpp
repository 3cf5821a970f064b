#include "trainer/parallel/gradient_buckets.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

GradientBuckets::GradientBuckets(Communicator& comm, const Tensor& flat_grads,
                                 int64_t bucket_elements)
    : comm_(comm), grads_(flat_grads) {
  KILN_CHECK(bucket_elements > 0, "parallel.ddp_bucket_size must be positive");
  const int64_t n = flat_grads.numel();
  for (int64_t begin = 0; begin < n;) {
    int64_t end = std::min(begin + bucket_elements, n);
    if (n - end < bucket_elements / 2) end = n;  // a short tail joins the bucket before it
    ends_.push_back(end);
    begin = end;
  }
}

void GradientBuckets::ready(int64_t elements) { start_until(elements); }

void GradientBuckets::finish() {
  start_until(grads_.numel());
  for (auto& pending : pending_) pending->wait();
  pending_.clear();
  next_ = 0;
}

void GradientBuckets::start_until(int64_t elements) {
  for (; next_ < ends_.size() && ends_[next_] <= elements; ++next_) {
    const int64_t begin = next_ == 0 ? 0 : ends_[next_ - 1];
    pending_.push_back(comm_.start_all_reduce(grads_.slice(begin, ends_[next_]), ReduceOp::Sum));
  }
}

}  // namespace kiln
