#include "trainer/model/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "trainer/memory/host_copy.h"

namespace kiln {

double vocab_parallel_cross_entropy(Ops& ops, Communicator& group, const Tensor& losses,
                                    const Tensor& lse, const Tensor& logits,
                                    const Tensor& local_targets,
                                    const std::vector<int32_t>& local_targets_host,
                                    int64_t local_vocab) {
  ops.cross_entropy_forward(losses, lse, logits, local_targets, local_vocab);
  const std::vector<double> local_loss = copy_to_doubles(ops, losses);
  std::vector<double> local_lse = copy_to_doubles(ops, lse);
  const auto rows = static_cast<int64_t>(local_lse.size());
  // loss = lse - target logit where the target is local: the logit is their difference.
  std::vector<double> target_logit(local_lse.size(), 0.0);
  for (int64_t n = 0; n < rows; ++n) {
    const int32_t t = local_targets_host[static_cast<size_t>(n)];
    if (t >= 0 && t < local_vocab) target_logit[n] = local_lse[n] - local_loss[n];
  }
  const int tp = group.size();
  std::vector<double> all_lse(static_cast<size_t>(rows * tp));
  group.all_gather(Tensor{all_lse.data(), DType::F64, {rows * tp}},
                   Tensor{local_lse.data(), DType::F64, {rows}});
  group.all_reduce(Tensor{target_logit.data(), DType::F64, {rows}}, ReduceOp::Sum);
  double sum = 0;
  for (int64_t n = 0; n < rows; ++n) {
    // A slice with no real columns has lse -inf and adds nothing.
    double top = -std::numeric_limits<double>::infinity();
    for (int r = 0; r < tp; ++r) top = std::max(top, all_lse[r * rows + n]);
    double total = 0;
    for (int r = 0; r < tp; ++r) {
      const double v = all_lse[r * rows + n];
      if (std::isfinite(v)) total += std::exp(v - top);
    }
    local_lse[n] = top + std::log(total);
    if (local_targets_host[static_cast<size_t>(n)] >= 0) sum += local_lse[n] - target_logit[n];
  }
  copy_from_doubles(ops, lse, local_lse);
  return sum;
}

}  // namespace kiln
