#include "kernels/cuda/cublaslt_library.h"

#include "base/check.h"
#include "kernels/cuda/dynamic_library.h"

namespace kiln::cuda {

CublasLtLibrary::CublasLtLibrary() {
  const std::string file = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string why;
  void* handle = open_library(file, why);
  // Never closed: the library is the process's for its whole life (cublaslt()).
  if (handle == nullptr ||
      !(resolve(handle, file, "cublasLtGetStatusName", status_name_, why) &&
        resolve(handle, file, "cublasLtGetStatusString", status_string_, why) &&
        resolve(handle, file, "cublasLtCreate", create, why) &&
        resolve(handle, file, "cublasLtDestroy", destroy, why) &&
        resolve(handle, file, "cublasLtMatmul", matmul, why) &&
        resolve(handle, file, "cublasLtMatmulDescCreate", matmul_desc_create, why) &&
        resolve(handle, file, "cublasLtMatmulDescDestroy", matmul_desc_destroy, why) &&
        resolve(handle, file, "cublasLtMatmulDescSetAttribute", matmul_desc_set_attribute, why) &&
        resolve(handle, file, "cublasLtMatrixLayoutCreate", matrix_layout_create, why) &&
        resolve(handle, file, "cublasLtMatrixLayoutDestroy", matrix_layout_destroy, why) &&
        resolve(handle, file, "cublasLtMatmulPreferenceCreate", matmul_preference_create, why) &&
        resolve(handle, file, "cublasLtMatmulPreferenceDestroy", matmul_preference_destroy, why) &&
        resolve(handle, file, "cublasLtMatmulPreferenceSetAttribute", matmul_preference_set_attribute,
                why) &&
        resolve(handle, file, "cublasLtMatmulAlgoGetHeuristic", matmul_algo_get_heuristic, why)))
    fail("cuBLASLt cannot be loaded: " + why);
}

void CublasLtLibrary::fail_with(cublasStatus_t status, const char* call, const std::string& what) const {
  fail(std::string("cuBLASLt: ") + call + " failed with " + status_name_(status) + " (" + status_string_(status) +
       ") for " + what);
}

const CublasLtLibrary& cublaslt() {
  static const CublasLtLibrary library;
  return library;
}

}  // namespace kiln::cuda
