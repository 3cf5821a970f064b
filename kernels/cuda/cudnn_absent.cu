// CudnnAttention in a build that found no cuDNN headers (CMakeLists.txt): the CUDA backend
// then computes attention with kiln's kernels alone.
#include "kernels/cuda/cudnn_attention.h"

namespace kiln::cuda {

std::unique_ptr<CudnnAttention> CudnnAttention::open(cudaStream_t, std::string& why) {
  why = "this build found no cuDNN headers (cudnn_graph.h); configure with CUDNN_PATH set to a cuDNN 9";
  return nullptr;
}

}  // namespace kiln::cuda
