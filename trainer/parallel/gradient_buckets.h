// Megatron's overlapped data-parallel gradient reduction. The flat gradient buffer holds
// the parameters in the order backward finishes them (trainer/model/parameters.h), so it is
// cut into buckets of at least `bucket_elements` consecutive elements; as backward reports
// that a leading part of the buffer is final, every bucket inside that part starts its
// all-reduce over the data-parallel ranks while backward goes on with earlier layers.
// finish() starts what is left and waits for all of it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/parallel/communicator.h"

namespace kiln {

class GradientBuckets {
 public:
  GradientBuckets(Communicator& comm, const Tensor& flat_grads, int64_t bucket_elements);

  // The buffer's first `elements` gradients will not change again in this step.
  void ready(int64_t elements);
  // Every bucket reduced: the buffer holds the sum over the ranks.
  void finish();

  int64_t buckets() const { return static_cast<int64_t>(ends_.size()); }

 private:
  void start_until(int64_t elements);

  Communicator& comm_;
  Tensor grads_;
  std::vector<int64_t> ends_;  // bucket b is [ends_[b - 1] or 0, ends_[b])
  size_t next_ = 0;            // the first bucket not started
  std::vector<std::unique_ptr<PendingCollective>> pending_;
};

}  // namespace kiln
