// Error checks for CUDA runtime calls and kernel launches. A failure throws kiln::Error
// (base/check.h) naming the call, the error and where it happened; the CLI prints one
// line and exits.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/check.h"

namespace kiln::cuda {

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    ::kiln::fail(std::string("CUDA error: ") + call + " failed with " + cudaGetErrorName(status) +
                 " (" + cudaGetErrorString(status) + ") at " + file + ":" + std::to_string(line));
  }
}

}  // namespace kiln::cuda

// KILN_CUDA_CHECK(cudaMemsetAsync(...)); throws on any error code.
#define KILN_CUDA_CHECK(call) ::kiln::cuda::check_cuda((call), #call, __FILE__, __LINE__)

// After a kernel launch: reports a bad launch configuration (grid, shared memory) at once.
// Errors raised while the kernel runs surface at the next synchronising call.
#define KILN_CUDA_CHECK_LAUNCH(name) \
  ::kiln::cuda::check_cuda(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
