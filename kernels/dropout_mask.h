// Which elements a LoRA adapter's dropout keeps (Ops::dropout): a counter-based mask, so no
// mask is stored, backward draws forward's again, and the host and a device draw the same bits
// (kernels/counter_random.h: integer arithmetic and an exact scaling).
//
// An element is named by what it is in the run, not by where a rank holds it: the run's
// number of its sample, its place in the whole sequence and its feature among the adapter's
// whole input width. So every layout draws the same mask for the same token: data
// parallelism's replicas and pipeline micro-batches by the sample number, context
// parallelism's chunks by the place in the sequence, a row-parallel layer's input columns by
// their global feature index, and the ranks of a tensor group, which hold the same input of a
// column-parallel layer, alike. The element's number is
//   (sample * seq_len + place) * features + feature,
// below 2^64 for any run of fewer than 2^64 / (seq_len * features) samples (1.5e11 at 8192
// tokens of 14336 features), and the stream names the adapter.
#pragma once

#include <cstdint>

#include "kernels/counter_random.h"
#include "kernels/host_device.h"

namespace kiln {

struct DropoutMask {
  double p = 0;  // the dropped fraction, in [0, 1)
  uint64_t seed = 0, stream = 0;
  // x's rows are sequences of `tokens` tokens, the first of them the run's sample first_sample.
  int64_t first_sample = 0, tokens = 1, seq_len = 1;
  // A sequence's tokens in x: runs of `run` tokens from starts[0] and starts[1] of the whole
  // sequence (context parallelism's two chunks; one run from 0 without it).
  int64_t run = 1, starts[2] = {0, 0};
  // x's columns are features [first_feature, first_feature + columns) of `features`.
  int64_t first_feature = 0, features = 0;

  KILN_HOST_DEVICE uint64_t index(int64_t row, int64_t col) const {
    const int64_t t = row % tokens, place = starts[t / run] + t % run;
    const uint64_t token = static_cast<uint64_t>(first_sample + row / tokens) * static_cast<uint64_t>(seq_len) +
                           static_cast<uint64_t>(place);
    return token * static_cast<uint64_t>(features) + static_cast<uint64_t>(first_feature + col);
  }
  // Kept with probability 1 - p: the uniform is an odd multiple of 2^-53, never 0 or 1.
  KILN_HOST_DEVICE bool keep(int64_t row, int64_t col) const {
    return counter_uniform(seed, stream, index(row, col)) >= p;
  }
  // What a kept element is multiplied by (inverted dropout, as torch.nn.Dropout), as a float:
  // every backend multiplies by the same factor.
  KILN_HOST_DEVICE float factor() const { return static_cast<float>(1.0 / (1.0 - p)); }
};

}  // namespace kiln
