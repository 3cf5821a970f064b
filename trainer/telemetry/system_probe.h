// Readings of the machine a rank runs on, for the store: the process's CPU and resident
// memory and the machine's memory always; the GPU's utilisation, memory, power and temperature through NVML when the
// run is on a GPU and NVML answers. Also the memory a metrics row reports.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "store/types.h"
#include "trainer/telemetry/nvml.h"
#include "trainer/telemetry/process_stats.h"

namespace kiln {

struct MemoryReading {
  int64_t used = 0;  // GPU: device memory this process holds; CPU: resident memory
  int64_t peak = 0;  // the most seen so far
};

class SystemProbe {
 public:
  // Call before the model is laid out: on a GPU, the device memory free now is the baseline
  // from which the run's use is counted. `gpu`: the device the ops run on, which NVML reads.
  SystemProbe(Ops& ops, int gpu);

  store::SystemRow sample(int rank);
  // What the run trains on, for the store: the GPU's name, or the CPU's model and threads.
  std::string device_name() const;
  MemoryReading memory();
  bool has_gpu_telemetry() const { return nvml_ != nullptr; }

 private:
  Ops& ops_;
  bool gpu_;
  int64_t free_at_start_ = 0;
  int64_t peak_ = 0;
  ProcessStats process_;
  std::unique_ptr<Nvml> nvml_;
};

}  // namespace kiln
