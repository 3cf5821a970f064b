// FP8 products on cuBLASLt (Ops::fp8_matmul): out[M, N] = a[M, K] b[N, K]^T times both
// operands' inverse scales, accumulated in fp32 (no fast accumulation), written as bf16, fp16
// or fp32 (a parameter gradient, accumulated with beta = 1).
//
// cuBLASLt's FP8 kernels take only the "TN" layout: its A transposed, its B not, both with K
// as the contiguous dimension. In kiln's row-major terms that is exactly a [M, K] times
// b [N, K]^T (the column-major D^T = b a^T), so each FP8 operand must be cast in the
// orientation its product reads: the weight gradient's operands are the transposes that
// fp8_cast_transpose writes alongside the codes.
//
// One Fp8Matmul per device and stream, with its own handle, workspace and plans (one per
// shape and types, the heuristic's first choice); the scales are device pointers set at
// each call, so a captured graph reads each step's scales.
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/cuda/cublaslt_library.h"

namespace kiln::cuda {

class Fp8Matmul {
 public:
  explicit Fp8Matmul(size_t workspace_bytes = size_t{32} << 20);
  ~Fp8Matmul();
  Fp8Matmul(const Fp8Matmul&) = delete;
  Fp8Matmul& operator=(const Fp8Matmul&) = delete;

  // a_type, b_type: CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2, not both E5M2; out_type: CUDA_R_16BF,
  // CUDA_R_16F or CUDA_R_32F. a_scale_inv and b_scale_inv point at one float each on the
  // device. K must be a multiple of 16 and the pointers 16-byte aligned (cuBLASLt's FP8 rule).
  void run(cudaDataType a_type, cudaDataType b_type, cudaDataType out_type, int64_t M, int64_t N, int64_t K,
           const void* a, const float* a_scale_inv, const void* b, const float* b_scale_inv, void* out,
           bool accumulate, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr;   // cuBLASLt's A: our b, [K, N] column-major, transposed
    cublasLtMatrixLayout_t second = nullptr;  // cuBLASLt's B: our a, [K, M] column-major
    cublasLtMatrixLayout_t out = nullptr;     // [N, M] column-major
    cublasLtMatmulAlgo_t algo{};
    ~Plan();
  };
  using Key = std::tuple<int, int, int, int64_t, int64_t, int64_t>;  // types, M, N, K
  const Plan& plan(const Key& key);

  const CublasLtLibrary& lt_ = cublaslt();  // loaded by the first product
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace kiln::cuda
