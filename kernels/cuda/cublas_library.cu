#include "kernels/cuda/cublas_library.h"

#include "base/check.h"
#include "kernels/cuda/dynamic_library.h"

namespace kiln::cuda {

CublasLibrary::CublasLibrary() {
  const std::string file = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string why;
  void* handle = open_library(file, why);
  // Never closed: the library is the process's for its whole life (cublas()).
  if (handle == nullptr || !(resolve(handle, file, "cublasGetStatusName", status_name_, why) &&
                             resolve(handle, file, "cublasGetStatusString", status_string_, why) &&
                             resolve(handle, file, "cublasCreate_v2", create, why) &&
                             resolve(handle, file, "cublasDestroy_v2", destroy, why) &&
                             resolve(handle, file, "cublasSetStream_v2", set_stream, why) &&
                             resolve(handle, file, "cublasSetWorkspace_v2", set_workspace, why) &&
                             resolve(handle, file, "cublasGemmGroupedBatchedEx", gemm_grouped_batched, why)))
    fail("cuBLAS cannot be loaded: " + why);
}

std::string CublasLibrary::status_text(cublasStatus_t status) const {
  return std::string(status_name_(status)) + " (" + status_string_(status) + ")";
}

const CublasLibrary& cublas() {
  static const CublasLibrary library;
  return library;
}

}  // namespace kiln::cuda
