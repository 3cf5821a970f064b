// cuBLAS, loaded at run time on the first grouped product (kernels/cuda/grouped_gemm.h) instead
// of linked, for the reason cuBLASLt is (kernels/cuda/cublaslt_library.h): a large library the
// dynamic loader would otherwise relocate at the start of every process. Only the calls the
// grouped GEMM makes.
#pragma once

#include <cublas_api.h>

#include <string>

namespace kiln::cuda {

class CublasLibrary {
 public:
  // Loads libcublas.so.<the header's major version> from the dynamic loader's search path;
  // throws kiln::Error with the loader's reason when it cannot, or when the library lacks a
  // function below.
  CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  // cuBLAS's name and description of a status: "CUBLAS_STATUS_NOT_SUPPORTED (...)".
  std::string status_text(cublasStatus_t status) const;

  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasGemmGroupedBatchedEx) gemm_grouped_batched = nullptr;

 private:
  decltype(&cublasGetStatusName) status_name_ = nullptr;
  decltype(&cublasGetStatusString) status_string_ = nullptr;
};

// The process's one CublasLibrary, loaded on the first call (thread-safe); it stays loaded
// until the process ends, as the handles made from it may live as long.
const CublasLibrary& cublas();

}  // namespace kiln::cuda
