// Row-major matmul on column-major cuBLASLt.
//
// A row-major X[r, c] with row stride ld is, to a column-major library, the matrix X^T
// [c, r] with leading dimension ld. So the row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is our B, its second our
// A, its m = N and n = M; nothing is copied or transposed in memory.
#include "kernels/cuda/matmul.h"

#include <string>
#include <utility>

#include "base/check.h"
#include "kernels/cuda/cublaslt_library.h"
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

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::GeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::DGelu: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::BiasGradA: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::None: return "";
    case Epilogue::Bias: return " + bias";
    case Epilogue::GeluAuxBias: return ", gelu(+ bias)";
    case Epilogue::DGelu: return ", dgelu";
    case Epilogue::BiasGradA: return ", bias gradient";
  }
  return "";
}

bool has_aux(Epilogue e) { return e == Epilogue::GeluAuxBias || e == Epilogue::DGelu; }

// The bias an epilogue reads, or the bias gradient it writes: one descriptor attribute.
const void* bias_pointer(const EpilogueArgs& e) {
  if (e.kind == Epilogue::Bias || e.kind == Epilogue::GeluAuxBias) return e.bias;
  return e.kind == Epilogue::BiasGradA ? e.bias_grad : nullptr;
}

}  // namespace

Matmul::Plan::~Plan() {
  if (c) cublaslt().matrix_layout_destroy(c);
  if (second) cublaslt().matrix_layout_destroy(second);
  if (first) cublaslt().matrix_layout_destroy(first);
  if (desc) cublaslt().matmul_desc_destroy(desc);
}

namespace {

std::string describe(const ProductKey& key) {
  const auto a_b = static_cast<cudaDataType>(key.a_b_type), c = static_cast<cudaDataType>(key.c_type);
  return std::string("C[") + std::to_string(key.M) + ", " + std::to_string(key.N) + "] " +
         type_name(c) + " = A" + (key.transpose_a ? "^T" : "") + " B" + (key.transpose_b ? "^T" : "") +
         epilogue_name(static_cast<Epilogue>(key.epilogue)) + " (" + type_name(a_b) + ", K = " +
         std::to_string(key.K) + ", lda " + std::to_string(key.lda) + ", ldb " +
         std::to_string(key.ldb) + ", ldc " + std::to_string(key.ldc) + ")";
}

}  // namespace

Matmul::Matmul(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  KILN_CHECK(workspace_bytes_ > kBiasGradBytes,
             "matmul: a workspace of " + std::to_string(workspace_bytes_) +
                 " bytes leaves cuBLASLt none");
  KILN_CUDA_CHECK(cudaGetDevice(&device_));
  lt_.check(lt_.create(&handle_), "cublasLtCreate", "the handle");
  const cudaError_t status = cudaMalloc(&workspace_, workspace_bytes_);
  if (status != cudaSuccess) {
    lt_.destroy(handle_);
    KILN_CUDA_CHECK(status);
  }
}

Matmul::~Matmul() {
  plans_.clear();
  // The workspace may still be in use by queued matmuls: cudaFree waits for the device.
  if (workspace_) cudaFree(workspace_);
  if (handle_) lt_.destroy(handle_);
}

void* Matmul::bias_grad_buffer(size_t bytes) const {
  return bytes <= kBiasGradBytes ? static_cast<char*>(workspace_) + lt_workspace_bytes() : nullptr;
}

// The epilogue's pointers live in the descriptor: set at every call, as layers differ.
void Matmul::set_pointers(const Plan& p, const EpilogueArgs& e, const std::string& shape) const {
  if (const void* bias = bias_pointer(e))
    lt_.check(lt_.matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof(bias)),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", shape);
  if (has_aux(e.kind))
    lt_.check(lt_.matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                            &e.aux, sizeof(e.aux)),
             "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)", shape);
}

const Matmul::Plan& Matmul::plan(const ProductKey& key, const Call& call) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;

  const std::string shape = describe(key);
  const auto a_b_type = static_cast<cudaDataType>(key.a_b_type);
  const auto c_type = static_cast<cudaDataType>(key.c_type);
  const EpilogueArgs& e = *call.epilogue;
  auto plan = std::make_unique<Plan>();
  const auto unfused = [&]() -> const Plan& {
    plan->runs = false;
    tuner_.count_unfused();
    return *plans_.emplace(key, std::move(plan)).first->second;
  };
  lt_.check(lt_.matmul_desc_create(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate", shape);
  // cuBLASLt's first operand is our B (op T when B is stored [N, K]), its second our A.
  const cublasOperation_t op_first = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_.check(lt_.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                          sizeof(op_first)),
           "cublasLtMatmulDescSetAttribute(TRANSA)", shape);
  lt_.check(lt_.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                          sizeof(op_second)),
           "cublasLtMatmulDescSetAttribute(TRANSB)", shape);
  const cublasLtEpilogue_t epilogue = lt_epilogue(e.kind);
  lt_.check(lt_.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                          sizeof(epilogue)),
           "cublasLtMatmulDescSetAttribute(EPILOGUE)", shape);
  if (has_aux(e.kind))
    lt_.check(lt_.matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                            &key.aux_ld, sizeof(key.aux_ld)),
             "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)", shape);
  // The heuristic reads the epilogue's pointers for their alignment (part of the key).
  set_pointers(*plan, e, shape);

  // Column-major views (rows, cols, ld): B [K, N] row-major is [N, K]; B [N, K] is [K, N];
  // A [M, K] is [K, M]; A [K, M] is [M, K]; C [M, N] is [N, M].
  const uint64_t M = key.M, N = key.N, K = key.K;
  lt_.check(lt_.matrix_layout_create(&plan->first, a_b_type, key.transpose_b ? K : N,
                                      key.transpose_b ? N : K, key.ldb),
           "cublasLtMatrixLayoutCreate(B)", shape);
  lt_.check(lt_.matrix_layout_create(&plan->second, a_b_type, key.transpose_a ? M : K,
                                      key.transpose_a ? K : M, key.lda),
           "cublasLtMatrixLayoutCreate(A)", shape);
  lt_.check(lt_.matrix_layout_create(&plan->c, c_type, N, M, key.ldc),
           "cublasLtMatrixLayoutCreate(C)", shape);
  // The GELU matrix's leading dimension must be a multiple of 8 (cublasLt.h).
  if (has_aux(e.kind) && key.aux_ld % 8 != 0) return unfused();

  cublasLtMatmulPreference_t preference = nullptr;
  lt_.check(lt_.matmul_preference_create(&preference), "cublasLtMatmulPreferenceCreate", shape);
  const uint64_t max_workspace = lt_workspace_bytes();
  cublasStatus_t status = lt_.matmul_preference_set_attribute(
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
      status = lt_.matmul_preference_set_attribute(preference, a.attribute, &a.bytes,
                                                    sizeof(a.bytes));
  }
  cublasLtMatmulHeuristicResult_t results[ProductTuner::kCandidates] = {};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = lt_.matmul_algo_get_heuristic(handle_, plan->desc, plan->first, plan->second,
                                            plan->c, plan->c, preference,
                                            ProductTuner::kCandidates, results, &found);
  lt_.matmul_preference_destroy(preference);
  // An epilogue cuBLASLt does not offer here (it may say so by status, by finding nothing or
  // by a first candidate that cannot run) runs as separate kernels; a plain product it must
  // offer.
  if (e.kind != Epilogue::None && (status != CUBLAS_STATUS_SUCCESS || found == 0 ||
                                   results[0].state != CUBLAS_STATUS_SUCCESS))
    return unfused();
  lt_.check(status, "cublasLtMatmulAlgoGetHeuristic", shape);
  if (found == 0 || results[0].state != CUBLAS_STATUS_SUCCESS)
    ::kiln::fail("cuBLASLt: no algorithm for " + shape + " (pointer alignment A " +
                 std::to_string(key.align_a) + ", B " + std::to_string(key.align_b) + ", C " +
                 std::to_string(key.align_c) + " bytes)");
  plan->algo = results[tuned_choice(key, *plan, results, found, call)].algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

bool Matmul::run(cudaDataType a_b_type, cudaDataType c_type, bool transpose_a, bool transpose_b,
                 int64_t M, int64_t N, int64_t K, const void* A, int64_t lda, const void* B,
                 int64_t ldb, void* C, int64_t ldc, bool accumulate, cudaStream_t stream,
                 const EpilogueArgs& epilogue) {
  ProductKey key;
  key.device = device_;
  key.a_b_type = a_b_type;
  key.c_type = c_type;
  key.transpose_a = transpose_a;
  key.transpose_b = transpose_b;
  key.M = M, key.N = N, key.K = K, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
  key.epilogue = static_cast<int>(epilogue.kind);
  const auto shape = [&] { return describe(key); };
  KILN_CHECK(is_input_type(a_b_type) && (c_type == a_b_type || c_type == CUDA_R_32F),
             "matmul: unsupported types for " + shape() +
                 " (A, B: f32, bf16 or f16; C: the same type or f32)");
  KILN_CHECK(M >= 0 && N >= 0 && K >= 0, "matmul: negative size in " + shape());
  // An empty product's epilogue (a bias over no rows, a bias gradient over none) is the
  // separate ops' to get right.
  if (epilogue.kind != Epilogue::None && (M == 0 || N == 0 || K == 0)) return false;
  if (M == 0 || N == 0) return true;
  KILN_CHECK(ldc >= N, "matmul: ldc < N in " + shape());
  if (K == 0) {  // op(A) op(B) is zero: C keeps its value or becomes zero
    if (!accumulate) {
      const size_t size = type_size(c_type);
      KILN_CUDA_CHECK(cudaMemset2DAsync(C, static_cast<size_t>(ldc) * size, 0,
                                        static_cast<size_t>(N) * size, static_cast<size_t>(M),
                                        stream));
    }
    return true;
  }
  KILN_CHECK(lda >= (transpose_a ? M : K), "matmul: lda too small in " + shape());
  KILN_CHECK(ldb >= (transpose_b ? K : N), "matmul: ldb too small in " + shape());
  KILN_CHECK(A && B && C, "matmul: null pointer in " + shape());
  KILN_CHECK(bias_pointer(epilogue) || epilogue.kind == Epilogue::None ||
                 epilogue.kind == Epilogue::DGelu,
             "matmul: no bias pointer for " + shape());
  KILN_CHECK(!has_aux(epilogue.kind) || (epilogue.aux && epilogue.aux_ld >= N),
             "matmul: no GELU matrix, or its row stride below N, for " + shape());
  int device = -1;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  KILN_CHECK(device == device_, "matmul: called on device " + std::to_string(device) +
                                    " but made on device " + std::to_string(device_));

  key.align_a = alignment(A);
  key.align_b = alignment(B);
  key.align_c = alignment(C);
  if (const void* bias = bias_pointer(epilogue)) key.align_bias = alignment(bias);
  if (has_aux(epilogue.kind)) {
    key.align_aux = alignment(epilogue.aux);
    key.aux_ld = epilogue.aux_ld;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const Plan& p = plan(key, Call{A, B, C, beta, &epilogue, stream});
  if (!p.runs) return false;
  if (epilogue.kind != Epilogue::None) set_pointers(p, epilogue, shape());
  lt_.check(lt_.matmul(handle_, p.desc, &alpha, B, p.first, A, p.second, &beta, C, p.c, C, p.c,
                          &p.algo, workspace_, lt_workspace_bytes(), stream),
           "cublasLtMatmul", shape);
  return true;
}

}  // namespace kiln::cuda
