// Megatron's vocabulary-parallel cross-entropy: each tensor-parallel rank holds the logits of
// its slice of the vocabulary, and no rank ever holds a whole row. Each rank takes its slice's
// log-sum-exp per row and, where the target falls in its slice, the target's logit; the
// slices' log-sum-exps are combined over the group (gathered and summed as exponentials
// around their maximum), and the target logits summed, so every rank has the whole row's
// log-sum-exp and loss. Backward is then the plain op on the local slice with the whole
// log-sum-exp: softmax minus the one-hot where the target is local.
#pragma once

#include <vector>

#include "kernels/ops.h"
#include "trainer/parallel/communicator.h"

namespace kiln {

// logits[N, local columns]; local_targets: the targets in this slice's columns, < 0 where
// masked and >= local_vocab where another rank holds them (host copy alongside the device
// tensor). Writes the rows' whole-vocabulary log-sum-exps into lse and returns the sum of the
// rows' losses (masked rows add 0). A collective over the group.
double vocab_parallel_cross_entropy(Ops& ops, Communicator& group, const Tensor& losses,
                                    const Tensor& lse, const Tensor& logits,
                                    const Tensor& local_targets,
                                    const std::vector<int32_t>& local_targets_host,
                                    int64_t local_vocab);

}  // namespace kiln
