// Many products of their own shapes in one launch: cuBLAS's grouped GEMM
// (cublasGemmGroupedBatchedEx), which the CUDA backend's experts' products run on (ops.h:
// expert_matmul, expert_weight_grad), one product an expert, where the per-expert calls they
// replace each launched a kernel too small to fill the GPU.
//
// One GroupedGemm per CudaOps and stream: the device table of the products' pointers (which
// the grouped call reads from device memory) is allocated once, for up to kMostProducts; the
// cuBLAS handle is made on the first run (loading cuBLAS then), works on the ops' stream and
// shares cuBLASLt's workspace (kernels/cuda/matmul.h), which the stream never uses twice at
// once. Not thread-safe.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cuda {

// One product, row-major as Matmul::run: C[M, N] = op(A) op(B) (+ C when accumulating), A
// [M, K] ([K, M] transposed), B [K, N] ([N, K] transposed), lda, ldb, ldc row strides.
struct GroupedProduct {
  const void* A = nullptr;
  const void* B = nullptr;
  void* C = nullptr;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
};

class GroupedGemm {
 public:
  static constexpr size_t kMostProducts = 1024;

  // Allocates the pointer table on the current device.
  GroupedGemm();
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  // Every product, in one grouped call on `stream`: A, B and C of one type (CUDA_R_32F,
  // CUDA_R_16BF or CUDA_R_16F), accumulated in FP32 (CUBLAS_COMPUTE_32F: no TF32, as
  // Matmul's), all with the same transposes and accumulation. The workspace is cuBLAS's for
  // the call. Returns false, having launched nothing, where the call does not apply: C of
  // another type than A and B (16-bit inputs into FP32 gradients), more than kMostProducts
  // products, a dimension past an int, cuBLAS that cannot be loaded or that does not group
  // these types (why_not() says which, the last time); the caller then runs the products one
  // by one. Throws kiln::Error when
  // cuBLAS fails a call it took.
  bool run(cudaDataType type, cudaDataType c_type, bool transpose_a, bool transpose_b,
           const std::vector<GroupedProduct>& products, bool accumulate, cudaStream_t stream, void* workspace,
           size_t workspace_bytes);

  const std::string& why_not() const { return why_not_; }

 private:
  void* table_ = nullptr;             // kMostProducts x {A, B, C} on the device
  cublasHandle_t handle_ = nullptr;   // made on the first run
  bool unavailable_ = false;          // cuBLAS could not be loaded
  std::string why_not_;
  // The host side of one call, kept to avoid allocating on every step.
  std::vector<const void*> pointers_;
  std::vector<cublasOperation_t> trans_first_, trans_second_;
  std::vector<int> m_, n_, k_, ld_first_, ld_second_, ldc_, group_size_;
  std::vector<float> alpha_, beta_;
};

}  // namespace kiln::cuda
