// The tables kiln_bench_step --profile prints and writes: the per-op records of a few profiled
// steps (kernels/profiled_ops.h), per step, each set against its floor on the device.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/profiled_ops.h"

namespace kiln {

// The measured ceilings an op's floor is computed from; 0 when not given (no floor).
struct DeviceCeilings {
  double gemm_flops = 0;  // FLOP/s of a large bf16 matmul
  double bandwidth = 0;   // bytes/s of a device-to-device copy
  bool known() const { return gemm_flops > 0 && bandwidth > 0; }
  // The least time `flops` and `bytes` can take: the slower of the two limits.
  double floor_seconds(double flops, double bytes) const;
};

struct StepProfile {
  std::string title;  // the benchmark case and device
  int threads = 0;    // the CPU backend's threads (0 on a GPU)
  int steps = 0;
  double wall_seconds = 0;  // the profiled steps end to end, host time between ops included
  std::vector<OpProfile> ops;
};

// A markdown table, one row per op and shape, the most time first, then the total.
std::string profile_table(const StepProfile& profile, const DeviceCeilings& ceilings);
nlohmann::json profile_json(const StepProfile& profile, const DeviceCeilings& ceilings);

}  // namespace kiln
