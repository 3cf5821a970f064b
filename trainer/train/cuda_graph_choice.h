// Whether a run's training step is captured once as a CUDA graph and replayed
// (train.cuda_graphs, docs/gpu.md#cuda-graphs), decided before step 1 from the config, the
// rank layout and the backend: a replayed step can hold no decision the host makes during
// the step, and no transfer that passes through the host.
#pragma once

#include <string>

#include "kernels/tensor.h"
#include "trainer/config/config.h"
#include "trainer/parallel/layout.h"

namespace kiln {

struct CudaGraphChoice {
  bool use = false;
  std::string why_not;  // when not used: the reason, one line
};

// device: the backend the run trains on; device_comm: parallel.device_comm as resolved
// (nccl or mpi). The first reason that applies wins.
CudaGraphChoice choose_cuda_graphs(const Config& config, const ParallelLayout& layout, Device device,
                                   const std::string& device_comm);

}  // namespace kiln
