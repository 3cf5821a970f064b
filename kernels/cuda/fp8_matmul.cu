#include "kernels/cuda/fp8_matmul.h"

#include <string>

#include "base/check.h"
#include "kernels/cuda/cublaslt_library.h"
#include "kernels/cuda/cuda_check.h"

namespace kiln::cuda {
namespace {

std::string describe(cudaDataType a, cudaDataType b, int64_t M, int64_t N, int64_t K) {
  const auto name = [](cudaDataType t) { return t == CUDA_R_8F_E4M3 ? "e4m3" : t == CUDA_R_8F_E5M2 ? "e5m2" : "?"; };
  return std::string("fp8 product [") + std::to_string(M) + ", " + std::to_string(K) + "] " + name(a) + " x [" +
         std::to_string(N) + ", " + std::to_string(K) + "]^T " + name(b);
}

bool is_fp8(cudaDataType t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

}  // namespace

Fp8Matmul::Plan::~Plan() {
  if (out) cublaslt().matrix_layout_destroy(out);
  if (second) cublaslt().matrix_layout_destroy(second);
  if (first) cublaslt().matrix_layout_destroy(first);
  if (desc) cublaslt().matmul_desc_destroy(desc);
}

Fp8Matmul::Fp8Matmul(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  lt_.check(lt_.create(&handle_), "cublasLtCreate", "the FP8 handle");
  const cudaError_t status = cudaMalloc(&workspace_, workspace_bytes_);
  if (status != cudaSuccess) {
    lt_.destroy(handle_);
    KILN_CUDA_CHECK(status);
  }
}

Fp8Matmul::~Fp8Matmul() {
  plans_.clear();
  if (workspace_) cudaFree(workspace_);  // waits for queued products
  if (handle_) lt_.destroy(handle_);
}

const Fp8Matmul::Plan& Fp8Matmul::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  const auto [a_int, b_int, out_int, M, N, K] = key;
  const auto a_type = static_cast<cudaDataType>(a_int), b_type = static_cast<cudaDataType>(b_int),
             out_type = static_cast<cudaDataType>(out_int);
  const std::string what = describe(a_type, b_type, M, N, K);
  auto p = std::make_unique<Plan>();
  lt_.check(lt_.matmul_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", what);
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  lt_.check(lt_.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)),
           "cublasLtMatmulDescSetAttribute(TRANSA)", what);
  lt_.check(lt_.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)),
           "cublasLtMatmulDescSetAttribute(TRANSB)", what);
  const auto rows = static_cast<uint64_t>(K);
  lt_.check(lt_.matrix_layout_create(&p->first, b_type, rows, static_cast<uint64_t>(N), K),
           "cublasLtMatrixLayoutCreate(b)", what);
  lt_.check(lt_.matrix_layout_create(&p->second, a_type, rows, static_cast<uint64_t>(M), K),
           "cublasLtMatrixLayoutCreate(a)", what);
  lt_.check(lt_.matrix_layout_create(&p->out, out_type, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N),
           "cublasLtMatrixLayoutCreate(out)", what);

  cublasLtMatmulPreference_t preference = nullptr;
  lt_.check(lt_.matmul_preference_create(&preference), "cublasLtMatmulPreferenceCreate", what);
  const uint64_t max_workspace = workspace_bytes_;
  cublasStatus_t status = lt_.matmul_preference_set_attribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = lt_.matmul_algo_get_heuristic(handle_, p->desc, p->first, p->second, p->out, p->out, preference, 1,
                                            &result, &found);
  lt_.matmul_preference_destroy(preference);
  lt_.check(status, "cublasLtMatmulAlgoGetHeuristic", what);
  KILN_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS, "cuBLASLt: no algorithm for " + what);
  p->algo = result.algo;
  return *plans_.emplace(key, std::move(p)).first->second;
}

void Fp8Matmul::run(cudaDataType a_type, cudaDataType b_type, cudaDataType out_type, int64_t M, int64_t N,
                    int64_t K, const void* a, const float* a_scale_inv, const void* b, const float* b_scale_inv,
                    void* out, bool accumulate, cudaStream_t stream) {
  const auto what = [&] { return describe(a_type, b_type, M, N, K); };
  KILN_CHECK(is_fp8(a_type) && is_fp8(b_type) && !(a_type == CUDA_R_8F_E5M2 && b_type == CUDA_R_8F_E5M2),
             "fp8_matmul: operands must be e4m3 or e5m2, not both e5m2, in " + what());
  KILN_CHECK(out_type == CUDA_R_16BF || out_type == CUDA_R_16F || out_type == CUDA_R_32F,
             "fp8_matmul: out must be bf16, fp16 or fp32 in " + what());
  if (M == 0 || N == 0) return;
  KILN_CHECK(K % 16 == 0, "fp8_matmul: K = " + std::to_string(K) +
                              " is not a multiple of 16, which cuBLASLt's FP8 products need (" + what() + ")");
  for (const void* ptr : {a, b, static_cast<const void*>(out)})
    KILN_CHECK(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, "fp8_matmul: an operand is not 16-byte aligned in " + what());
  const Plan& p = plan(Key{a_type, b_type, out_type, M, N, K});
  // cuBLASLt's A is our b, its B our a: each scale pointer follows its operand.
  lt_.check(lt_.matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale_inv,
                                          sizeof(b_scale_inv)),
           "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)", what);
  lt_.check(lt_.matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale_inv,
                                          sizeof(a_scale_inv)),
           "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)", what);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  lt_.check(lt_.matmul(handle_, p.desc, &alpha, b, p.first, a, p.second, &beta, out, p.out, out, p.out, &p.algo,
                          workspace_, workspace_bytes_, stream),
           "cublasLtMatmul", what);
}

}  // namespace kiln::cuda
