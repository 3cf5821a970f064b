// The metric row the store benchmarks log for a rank (store_scale_benchmark.cpp,
// live_message_benchmark.cpp): the figures a trainer logs, loss and lr the same on every
// rank, the times and throughput its own, so a spread across ranks has a width.
#pragma once

#include <cstdint>

#include "store/types.h"

namespace kiln::bench {

inline store::MetricRow rank_row(int64_t step, int rank) {
  store::MetricRow row;
  row.step = step;
  row.rank = rank;
  row.tokens = step * 4096;
  row.loss = 2.0 + 8.0 / static_cast<double>(step + 1);
  row.lr = 3e-4;
  row.grad_norm = 1.0 + 0.001 * static_cast<double>(step % 97);
  row.tokens_per_s = 9000.0 + static_cast<double>((rank * 31 + step) % 500);
  row.tflops = 400.0;
  row.mfu = 0.4;
  row.fwd_ms = 100.0 + static_cast<double>(rank % 7);
  row.bwd_ms = 200.0 + static_cast<double>(rank % 11);
  row.opt_ms = 10.0;
  row.comm_ms = 5.0 + static_cast<double>((rank + step) % 3);
  row.data_ms = 1.0;
  row.mem_used = int64_t{60} << 30;
  row.mem_peak = int64_t{70} << 30;
  row.trained_tokens = 4096 * 1024;
  return row;
}

}  // namespace kiln::bench
