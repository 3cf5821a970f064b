#include "kernels/cuda/grouped_gemm.h"

#include <climits>

#include "base/check.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_check.h"

namespace kiln::cuda {
namespace {

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

GroupedGemm::GroupedGemm() {
  KILN_CUDA_CHECK(cudaMalloc(&table_, 3 * kMostProducts * sizeof(void*)));
}

GroupedGemm::~GroupedGemm() {
  if (handle_ != nullptr) cublas().destroy(handle_);
  cudaFree(table_);  // waits for the device: a queued call may still read it
}

bool GroupedGemm::run(cudaDataType type, cudaDataType c_type, bool transpose_a, bool transpose_b,
                      const std::vector<GroupedProduct>& products, bool accumulate, cudaStream_t stream,
                      void* workspace, size_t workspace_bytes) {
  const size_t G = products.size();
  if (c_type != type) {
    why_not_ = "cuBLAS's grouped GEMM writes its inputs' type only";
    return false;
  }
  if (G > kMostProducts) {
    why_not_ = "more than " + std::to_string(kMostProducts) + " products";
    return false;
  }
  for (const GroupedProduct& p : products)
    if (!(fits_int(p.M) && fits_int(p.N) && fits_int(p.K) && fits_int(p.lda) && fits_int(p.ldb) && fits_int(p.ldc))) {
      why_not_ = "a product's dimension is past an int";
      return false;
    }
  if (unavailable_) return false;
  if (handle_ == nullptr) {
    try {
      const CublasLibrary& library = cublas();
      const cublasStatus_t created = library.create(&handle_);
      KILN_CHECK(created == CUBLAS_STATUS_SUCCESS, "cublasCreate failed with " + library.status_text(created));
    } catch (const Error& e) {
      unavailable_ = true;
      why_not_ = e.what();
      return false;
    }
  }
  if (G == 0) return true;
  const CublasLibrary& library = cublas();
  const auto check = [&](cublasStatus_t status, const char* call) {
    KILN_CHECK(status == CUBLAS_STATUS_SUCCESS,
               std::string("cuBLAS: ") + call + " failed with " + library.status_text(status) + " for " +
                   std::to_string(G) + " grouped products");
  };
  check(library.set_stream(handle_, stream), "cublasSetStream");
  check(library.set_workspace(handle_, workspace, workspace_bytes), "cublasSetWorkspace");

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS's first operand
  // is our B, its second our A, and its m and n our N and M. Each product is a group of one.
  pointers_.assign(3 * G, nullptr);
  for (std::vector<int>* v : {&m_, &n_, &k_, &ld_first_, &ld_second_, &ldc_, &group_size_}) v->assign(G, 1);
  trans_first_.assign(G, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  trans_second_.assign(G, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  alpha_.assign(G, 1.0f);
  beta_.assign(G, accumulate ? 1.0f : 0.0f);
  for (size_t g = 0; g < G; ++g) {
    const GroupedProduct& p = products[g];
    pointers_[g] = p.B;
    pointers_[G + g] = p.A;
    pointers_[2 * G + g] = p.C;
    m_[g] = static_cast<int>(p.N);
    n_[g] = static_cast<int>(p.M);
    k_[g] = static_cast<int>(p.K);
    ld_first_[g] = static_cast<int>(p.ldb);
    ld_second_[g] = static_cast<int>(p.lda);
    ldc_[g] = static_cast<int>(p.ldc);
  }
  // Queued before the call on the same stream, after any earlier call that read the table.
  KILN_CUDA_CHECK(cudaMemcpyAsync(table_, pointers_.data(), 3 * G * sizeof(void*), cudaMemcpyHostToDevice, stream));
  void* const* table = static_cast<void**>(table_);
  const void* const* first = table;
  const void* const* second = table + G;
  const cublasStatus_t status = library.gemm_grouped_batched(
      handle_, trans_first_.data(), trans_second_.data(), m_.data(), n_.data(), k_.data(), alpha_.data(), first,
      type, ld_first_.data(), second, type, ld_second_.data(), beta_.data(), table + 2 * G, c_type, ldc_.data(),
      static_cast<int>(G), group_size_.data(), CUBLAS_COMPUTE_32F);
  // A type this cuBLAS does not group: the products go one by one (the table's copy is harmless).
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    why_not_ = "cuBLAS does not group these types: " + library.status_text(status);
    return false;
  }
  check(status, "cublasGemmGroupedBatchedEx");
  return true;
}

}  // namespace kiln::cuda
