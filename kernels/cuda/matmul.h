// Dense matmul on cuBLASLt, row-major like the CPU backend's kiln::cpu::gemm, with the
// epilogues a linear layer fuses into its products (bias, GELU, their gradients).
//
// One Matmul per device and stream: it owns a cuBLASLt handle and one workspace, made on the
// device current at construction, and a cache of matmul plans (descriptors and the algorithm
// chosen), filled on first use of each product: the heuristic's first candidate, or, while
// tuning is on (kernels/product_tuning.h), the fastest of its first candidates timed on that
// call's buffers. Not thread-safe; two streams running matmuls at once need two Matmul objects
// (they would share the workspace).
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "kernels/cuda/cublaslt_library.h"
#include "kernels/product_tuning.h"

namespace kiln::cuda {

// What a product does besides C = op(A) op(B), in kiln's row-major terms (C is [M, N]). All
// vectors and matrices are of C's type, packed.
enum class Epilogue : int {
  None = 0,
  // C = op(A) op(B) + bias[N] on every row (cuBLASLt's BIAS).
  Bias,
  // aux = op(A) op(B) + bias[N], C = gelu(aux), GELU's tanh form (GELU_AUX_BIAS).
  GeluAuxBias,
  // C = gelu'(aux) * (op(A) op(B)), aux read (DGELU).
  DGelu,
  // Also bias_grad[M] = the sum over k of op(A)[m, k], written, not added to (cuBLASLt's
  // BGRADB: its B is our A): the bias gradient of a weight-gradient product dW += dy^T x.
  BiasGradA,
};

struct EpilogueArgs {
  Epilogue kind = Epilogue::None;
  const void* bias = nullptr;  // Bias, GeluAuxBias
  void* bias_grad = nullptr;   // BiasGradA
  void* aux = nullptr;         // GeluAuxBias (written), DGelu (read): [M, N], row stride aux_ld
  int64_t aux_ld = 0;          // a multiple of 8, at least N
};

class Matmul {
 public:
  // Creates the cuBLASLt handle and allocates the workspace (32 MiB suits Hopper) once: its
  // last kBiasGradBytes hold bias gradients (bias_grad_buffer), the rest is cuBLASLt's.
  explicit Matmul(size_t workspace_bytes = size_t{32} << 20);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  static constexpr size_t kBiasGradBytes = size_t{1} << 20;

  // C[M, N] = op(A) op(B) (+ C when accumulate), then the epilogue, all row-major: A is
  // [M, K] ([K, M] when transpose_a), B is [K, N] ([N, K] when transpose_b); lda, ldb, ldc
  // are row strides in elements. A and B share a type: CUDA_R_32F, CUDA_R_16BF or
  // CUDA_R_16F; C is that type or CUDA_R_32F for 16-bit inputs (float gradient
  // accumulators). Accumulation is plain FP32 (CUBLAS_COMPUTE_32F; no TF32), so float
  // matmuls match a float CPU gemm closely. Launches on `stream`, does not synchronise
  // (except when it tunes a new product); throws kiln::Error on a bad argument or a failed
  // cuBLASLt call. Returns false, having launched nothing, when cuBLASLt has no algorithm for
  // the epilogue at this call (the caller then runs the unfused ops); a product without an
  // epilogue always runs.
  bool run(cudaDataType a_b_type, cudaDataType c_type, bool transpose_a, bool transpose_b,
           int64_t M, int64_t N, int64_t K, const void* A, int64_t lda, const void* B,
           int64_t ldb, void* C, int64_t ldc, bool accumulate, cudaStream_t stream,
           const EpilogueArgs& epilogue = {});

  // Device memory for `bytes` of bias gradient (Epilogue::BiasGradA writes it whole), or
  // null when it holds less; valid until the next product with that epilogue.
  void* bias_grad_buffer(size_t bytes) const;

  // Ops::tune_products and product_tuning.
  void tune(bool on) { tuner_.set_enabled(on); }
  const ProductTuner& tuner() const { return tuner_; }

  size_t workspace_bytes() const { return workspace_bytes_; }
  // cuBLASLt's part of the workspace, which another library's products queued on the same
  // stream may use too (kernels/cuda/grouped_gemm.h): the stream runs them one at a time.
  void* product_workspace() const { return workspace_; }
  size_t product_workspace_bytes() const { return lt_workspace_bytes(); }
  // Number of distinct products planned so far (for tests and logs).
  size_t cached_plans() const { return plans_.size(); }

 private:
  // The descriptors and algorithm of one product, made once and reused.
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr;   // cuBLASLt's A: our B
    cublasLtMatrixLayout_t second = nullptr;  // cuBLASLt's B: our A
    cublasLtMatrixLayout_t c = nullptr;       // C and D (in place)
    cublasLtMatmulAlgo_t algo{};
    bool runs = true;  // false: cuBLASLt has no kernel for this epilogue here

    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan();
  };
  // One call's buffers and scalars: what tuning times a new plan's candidates on.
  struct Call {
    const void* A;
    const void* B;
    void* C;
    float beta;
    const EpilogueArgs* epilogue;
    cudaStream_t stream;
  };

  const Plan& plan(const ProductKey& key, const Call& call);
  void set_pointers(const Plan& plan, const EpilogueArgs& epilogue, const std::string& shape) const;
  // matmul_tuning.cu: the candidate tuning picks at a new product, timed on the call's
  // buffers; the first without tuning, or while the stream is being captured into a graph.
  int tuned_choice(const ProductKey& key, const Plan& plan,
                   const cublasLtMatmulHeuristicResult_t* candidates, int count, const Call& call);
  // Seconds one run of `algo` takes, or -1 when it cannot run; D is where it writes C.
  double time_algorithm(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const Call& call,
                        void* D);
  size_t lt_workspace_bytes() const { return workspace_bytes_ - kBiasGradBytes; }

  const CublasLtLibrary& lt_ = cublaslt();  // loaded by the first Matmul
  int device_ = -1;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  ProductTuner tuner_;
  std::unordered_map<ProductKey, std::unique_ptr<Plan>, ProductKeyHash> plans_;
};

}  // namespace kiln::cuda
