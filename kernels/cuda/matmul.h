// Dense matmul on cuBLASLt, row-major like the CPU backend's kiln::cpu::gemm.
//
// One Matmul per device and stream: it owns a cuBLASLt handle and one workspace, made on the
// device current at construction, and a cache of matmul plans (descriptors and the algorithm
// the heuristic picked), filled on first use of each shape. Not thread-safe; two streams
// running matmuls at once need two Matmul objects (they would share the workspace).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace kiln::cuda {

class Matmul {
 public:
  // Creates the cuBLASLt handle and allocates the workspace (32 MiB suits Hopper) once.
  explicit Matmul(size_t workspace_bytes = size_t{32} << 20);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // C[M, N] = op(A) op(B) (+ C when accumulate), all row-major: A is [M, K] ([K, M] when
  // transpose_a), B is [K, N] ([N, K] when transpose_b); lda, ldb, ldc are row strides in
  // elements. A and B share a type: CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F; C is that type
  // or CUDA_R_32F for 16-bit inputs (float gradient accumulators). Accumulation is plain
  // FP32 (CUBLAS_COMPUTE_32F; no TF32), so float matmuls match a float CPU gemm closely.
  // Launches on `stream`, does not synchronise; throws kiln::Error on a bad argument or a
  // failed cuBLASLt call.
  void run(cudaDataType a_b_type, cudaDataType c_type, bool transpose_a, bool transpose_b,
           int64_t M, int64_t N, int64_t K, const void* A, int64_t lda, const void* B,
           int64_t ldb, void* C, int64_t ldc, bool accumulate, cudaStream_t stream);

  size_t workspace_bytes() const { return workspace_bytes_; }
  // Number of distinct shapes planned so far (for tests and logs).
  size_t cached_plans() const { return plans_.size(); }

 private:
  // Everything a plan depends on: types, transposes, sizes, strides and the pointers'
  // alignment (the heuristic may only pick kernels the buffers are aligned for).
  struct Key {
    cudaDataType a_b_type;
    cudaDataType c_type;
    bool transpose_a;
    bool transpose_b;
    int64_t M, N, K, lda, ldb, ldc;
    uint32_t align_a, align_b, align_c;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& key) const;
  };
  struct Plan;

  const Plan& plan(const Key& key);

  int device_ = -1;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> plans_;
};

}  // namespace kiln::cuda
