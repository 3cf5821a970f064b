// Row-major matmul on column-major cuBLASLt.
//
// A row-major X[r, c] with row stride ld is, to a column-major library, the matrix X^T
// [c, r] with leading dimension ld. So the row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is our B, its second our
// A, its m = N and n = M; nothing is copied or transposed in memory.
#include "kernels/cuda/matmul.h"

#include <functional>
#include <string>
#include <utility>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"

namespace kiln::cuda {
namespace {

const char* type_name(cudaDataType type) {
  switch (type) {
    case CUDA_R_32F: return "f32";
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_16F: return "f16";
    default: return "unsupported";
  }
}

size_t type_size(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

bool is_input_type(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF || type == CUDA_R_16F;
}

// The largest power of two (up to 256, cuBLASLt's default assumption) dividing the address.
uint32_t alignment(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

}  // namespace

// The descriptors and algorithm of one shape, made once and reused.
struct Matmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr;   // cuBLASLt's A: our B
  cublasLtMatrixLayout_t second = nullptr;  // cuBLASLt's B: our A
  cublasLtMatrixLayout_t c = nullptr;       // C and D (in place)
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

namespace {

std::string describe(cudaDataType a_b_type, cudaDataType c_type, bool transpose_a,
                     bool transpose_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                     int64_t ldc) {
  return std::string("C[") + std::to_string(M) + ", " + std::to_string(N) + "] " +
         type_name(c_type) + " = A" + (transpose_a ? "^T" : "") + " B" + (transpose_b ? "^T" : "") +
         " (" + type_name(a_b_type) + ", K = " + std::to_string(K) + ", lda " +
         std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " + std::to_string(ldc) +
         ")";
}

void check_lt(cublasStatus_t status, const char* call, const std::string& shape) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    ::kiln::fail(std::string("cuBLASLt: ") + call + " failed with " +
                 cublasLtGetStatusName(status) + " (" + cublasLtGetStatusString(status) +
                 ") for " + shape);
  }
}

}  // namespace

size_t Matmul::KeyHash::operator()(const Key& key) const {
  size_t h = 0;
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  mix(static_cast<uint64_t>(key.a_b_type));
  mix(static_cast<uint64_t>(key.c_type));
  mix((key.transpose_a ? 1u : 0u) | (key.transpose_b ? 2u : 0u));
  mix(static_cast<uint64_t>(key.M));
  mix(static_cast<uint64_t>(key.N));
  mix(static_cast<uint64_t>(key.K));
  mix(static_cast<uint64_t>(key.lda));
  mix(static_cast<uint64_t>(key.ldb));
  mix(static_cast<uint64_t>(key.ldc));
  mix((uint64_t{key.align_a} << 32) | (uint64_t{key.align_b} << 16) | key.align_c);
  return h;
}

Matmul::Matmul(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  KILN_CUDA_CHECK(cudaGetDevice(&device_));
  check_lt(cublasLtCreate(&handle_), "cublasLtCreate", "the handle");
  if (workspace_bytes_ > 0) {
    const cudaError_t status = cudaMalloc(&workspace_, workspace_bytes_);
    if (status != cudaSuccess) {
      cublasLtDestroy(handle_);
      KILN_CUDA_CHECK(status);
    }
  }
}

Matmul::~Matmul() {
  plans_.clear();
  // The workspace may still be in use by queued matmuls: cudaFree waits for the device.
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

const Matmul::Plan& Matmul::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;

  const std::string shape = describe(key.a_b_type, key.c_type, key.transpose_a, key.transpose_b,
                                     key.M, key.N, key.K, key.lda, key.ldb, key.ldc);
  auto plan = std::make_unique<Plan>();
  check_lt(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate", shape);
  // cuBLASLt's first operand is our B (op T when B is stored [N, K]), its second our A.
  const cublasOperation_t op_first = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                          sizeof(op_first)),
           "cublasLtMatmulDescSetAttribute(TRANSA)", shape);
  check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                          sizeof(op_second)),
           "cublasLtMatmulDescSetAttribute(TRANSB)", shape);

  // Column-major views (rows, cols, ld): B [K, N] row-major is [N, K]; B [N, K] is [K, N];
  // A [M, K] is [K, M]; A [K, M] is [M, K]; C [M, N] is [N, M].
  const uint64_t M = key.M, N = key.N, K = key.K;
  check_lt(cublasLtMatrixLayoutCreate(&plan->first, key.a_b_type, key.transpose_b ? K : N,
                                      key.transpose_b ? N : K, key.ldb),
           "cublasLtMatrixLayoutCreate(B)", shape);
  check_lt(cublasLtMatrixLayoutCreate(&plan->second, key.a_b_type, key.transpose_a ? M : K,
                                      key.transpose_a ? K : M, key.lda),
           "cublasLtMatrixLayoutCreate(A)", shape);
  check_lt(cublasLtMatrixLayoutCreate(&plan->c, key.c_type, N, M, key.ldc),
           "cublasLtMatrixLayoutCreate(C)", shape);

  cublasLtMatmulPreference_t preference = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate", shape);
  const uint64_t max_workspace = workspace_bytes_;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace));
  const struct {
    cublasLtMatmulPreferenceAttributes_t attribute;
    uint32_t bytes;
  } alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
                    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}};
  for (const auto& a : alignments) {
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(preference, a.attribute, &a.bytes,
                                                    sizeof(a.bytes));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->first, plan->second,
                                            plan->c, plan->c, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  check_lt(status, "cublasLtMatmulAlgoGetHeuristic", shape);
  if (found == 0 || result.state != CUBLAS_STATUS_SUCCESS)
    ::kiln::fail("cuBLASLt: no algorithm for " + shape + " (pointer alignment A " +
                 std::to_string(key.align_a) + ", B " + std::to_string(key.align_b) + ", C " +
                 std::to_string(key.align_c) + " bytes)");
  plan->algo = result.algo;

  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Matmul::run(cudaDataType a_b_type, cudaDataType c_type, bool transpose_a, bool transpose_b,
                 int64_t M, int64_t N, int64_t K, const void* A, int64_t lda, const void* B,
                 int64_t ldb, void* C, int64_t ldc, bool accumulate, cudaStream_t stream) {
  const auto shape = [&] {
    return describe(a_b_type, c_type, transpose_a, transpose_b, M, N, K, lda, ldb, ldc);
  };
  KILN_CHECK(is_input_type(a_b_type) && (c_type == a_b_type || c_type == CUDA_R_32F),
             "matmul: unsupported types for " + shape() +
                 " (A, B: f32, bf16 or f16; C: the same type or f32)");
  KILN_CHECK(M >= 0 && N >= 0 && K >= 0, "matmul: negative size in " + shape());
  if (M == 0 || N == 0) return;
  KILN_CHECK(ldc >= N, "matmul: ldc < N in " + shape());
  if (K == 0) {  // op(A) op(B) is zero: C keeps its value or becomes zero
    if (!accumulate) {
      const size_t size = type_size(c_type);
      KILN_CUDA_CHECK(cudaMemset2DAsync(C, static_cast<size_t>(ldc) * size, 0,
                                        static_cast<size_t>(N) * size, static_cast<size_t>(M),
                                        stream));
    }
    return;
  }
  KILN_CHECK(lda >= (transpose_a ? M : K), "matmul: lda too small in " + shape());
  KILN_CHECK(ldb >= (transpose_b ? K : N), "matmul: ldb too small in " + shape());
  KILN_CHECK(A && B && C, "matmul: null pointer in " + shape());
  int device = -1;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  KILN_CHECK(device == device_, "matmul: called on device " + std::to_string(device) +
                                    " but made on device " + std::to_string(device_));

  const Key key{a_b_type,  c_type, transpose_a,  transpose_b,  M,           N,           K,
                lda,       ldb,    ldc,          alignment(A), alignment(B), alignment(C)};
  const Plan& p = plan(key);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_lt(cublasLtMatmul(handle_, p.desc, &alpha, B, p.first, A, p.second, &beta, C, p.c, C, p.c,
                          &p.algo, workspace_, workspace_bytes_, stream),
           "cublasLtMatmul", shape());
}

}  // namespace kiln::cuda
