// cuBLASLt, loaded at run time on the first product (kernels/cuda/matmul.h) instead of
// linked. The library is half a gigabyte: linked, the dynamic loader relocated it at the
// start of every kiln process and every test program, about half a second of CPU each,
// whether or not the process went near a GPU (`kiln runs list` as much as `kiln train`).
// A build takes cuBLASLt's types and enums from its header, as for cuDNN
// (kernels/cuda/cudnn_library.h).
#pragma once

#include <cublasLt.h>

#include <string>
#include <type_traits>

namespace kiln::cuda {

class CublasLtLibrary {
 public:
  // Loads libcublasLt.so.<the header's major version> from the dynamic loader's search path
  // (LD_LIBRARY_PATH, the program's run path); throws kiln::Error with the loader's reason
  // when it cannot, or when the library lacks a function below.
  CublasLtLibrary();
  CublasLtLibrary(const CublasLtLibrary&) = delete;
  CublasLtLibrary& operator=(const CublasLtLibrary&) = delete;

  // Throws kiln::Error naming the call, cuBLASLt's status and what it was for: `what` is a
  // string, or a function that gives one, called only on a failure (so that a product, on the
  // hot path, builds its description only when it has to say what failed).
  template <typename What>
  void check(cublasStatus_t status, const char* call, const What& what) const {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    if constexpr (std::is_invocable_v<What>)
      fail_with(status, call, what());
    else
      fail_with(status, call, what);
  }

  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) matrix_layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) matrix_layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) matmul_preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) matmul_preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) matmul_preference_set_attribute = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) matmul_algo_get_heuristic = nullptr;

 private:
  [[noreturn]] void fail_with(cublasStatus_t status, const char* call, const std::string& what) const;

  decltype(&cublasLtGetStatusName) status_name_ = nullptr;
  decltype(&cublasLtGetStatusString) status_string_ = nullptr;
};

// The process's one CublasLtLibrary, loaded on the first call (thread-safe); it stays loaded
// until the process ends, as the handles made from it may live as long.
const CublasLtLibrary& cublaslt();

}  // namespace kiln::cuda
