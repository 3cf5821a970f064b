// Matrix products go to OpenBLAS (its OpenMP build), one thread per call: kiln splits the
// rows of C over its own threads itself. OpenBLAS's threads give other bits for another
// thread count (it divides a product's work differently), and a run must give the same
// numbers whatever share of the machine's cores it gets, which changes as other runs start and
// end, and on a restart elsewhere (docs/resilience.md). Rows of C split into blocks, each an
// OpenBLAS call on one thread, give the single-threaded product's bits whatever the split:
// every element's sum over K is made the same way (blas_test.cpp holds it for every
// transpose). Called inside one of kiln's parallel regions, a product runs on that thread.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {

namespace {

CBLAS_TRANSPOSE trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

// Rows a block starts at a multiple of. OpenBLAS computes C in tiles of a few rows and gives
// the rows a product leaves over (M mod the tile) to kernels that sum in another order, so a
// block must end where the whole product's tiles end: Haswell's sgemm tiles 24 rows (blocks of
// 16, 32, 64 or 128 rows change the bits, multiples of 24 do not, measured), and 96 is a
// multiple of the tiles of OpenBLAS's other x86 cores too (4, 8, 16, 32).
constexpr int64_t kRowAlign = 96;

// Calls product(first_row, rows) for blocks of C's M rows, one per thread of the team, each
// on one thread: OpenBLAS's OpenMP build runs a call single-threaded inside an active parallel
// region, and outside one takes as many threads as OpenMP would give a region, so a single
// block runs with that number at 1.
template <typename F>
void by_row_blocks(int64_t M, F&& product) {
  const int team = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t per = std::max(kRowAlign, (M + team * kRowAlign - 1) / (team * kRowAlign) * kRowAlign);
  const int64_t blocks = (M + per - 1) / per;
  if (blocks <= 1) {
    omp_set_num_threads(1);
    product(int64_t{0}, M);
    omp_set_num_threads(team);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) product(b * per, std::min(per, M - b * per));
}

}  // namespace

template <>
void gemm<float>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  by_row_blocks(M, [&](int64_t m0, int64_t rows) {
    // Row m of op(A) starts at A + m lda, or at column m of A when it is transposed.
    cblas_sgemm(CblasRowMajor, trans(ta), trans(tb), static_cast<blasint>(rows), static_cast<blasint>(N),
                static_cast<blasint>(K), alpha, ta ? A + m0 : A + m0 * lda, static_cast<blasint>(lda), B,
                static_cast<blasint>(ldb), beta, C + m0 * ldc, static_cast<blasint>(ldc));
  });
}

template <>
void gemm<double>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                  const double* A, int64_t lda, const double* B, int64_t ldb, double beta,
                  double* C, int64_t ldc) {
  by_row_blocks(M, [&](int64_t m0, int64_t rows) {
    cblas_dgemm(CblasRowMajor, trans(ta), trans(tb), static_cast<blasint>(rows), static_cast<blasint>(N),
                static_cast<blasint>(K), alpha, ta ? A + m0 : A + m0 * lda, static_cast<blasint>(lda), B,
                static_cast<blasint>(ldb), beta, C + m0 * ldc, static_cast<blasint>(ldc));
  });
}

}  // namespace kiln::cpu
