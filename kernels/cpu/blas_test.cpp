// The matrix product gives the same bits on any number of threads (kernels/cpu/blas.cpp): a
// run keeps its curve bit for bit when its core share changes or it restarts on another
// machine's cores. And it is the product, against a sum in double.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/kernels.h"

namespace kiln::cpu {
namespace {

struct Shape {
  int64_t M, N, K;
};

// C = op(A) op(B) + beta C on `threads` threads.
std::vector<float> product(const Shape& s, bool ta, bool tb, float beta, int threads, const std::vector<float>& a,
                           const std::vector<float>& b, std::vector<float> c) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  gemm<float>(ta, tb, s.M, s.N, s.K, 1.0f, a.data(), ta ? s.M : s.K, b.data(), tb ? s.K : s.N, beta, c.data(), s.N);
  omp_set_num_threads(before);
  return c;
}

TEST(CpuGemm, TheBitsDoNotDependOnTheThreadCount) {
  // Tokens x features shapes of the tiny models, odd sizes that leave partial tiles, and one
  // large enough that OpenBLAS's own threads would split it.
  const Shape shapes[] = {{256, 192, 64}, {64, 64, 256}, {257, 64, 256}, {33, 1000, 17}, {5, 7, 300}, {512, 512, 512}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.M * s.K)), b(static_cast<size_t>(s.K * s.N)),
        c(static_cast<size_t>(s.M * s.N));
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    for (float& x : c) x = u(rng);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.0f, 1.0f}) {
          const std::vector<float> one = product(s, ta, tb, beta, 1, a, b, c);
          for (const int threads : {2, 3, 4, 7}) {
            const std::vector<float> many = product(s, ta, tb, beta, threads, a, b, c);
            EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
                << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb << " beta " << beta << " on "
                << threads << " threads";
          }
          // The product itself: fp32 sums of K terms of size up to 1 are within K * 2^-24 * K of
          // the double sum (a loose bound on the rounding of each partial sum).
          for (int64_t m = 0; m < s.M; m += 13)
            for (int64_t n = 0; n < s.N; n += 11) {
              double want = beta * c[static_cast<size_t>(m * s.N + n)];
              for (int64_t k = 0; k < s.K; ++k)
                want += static_cast<double>(a[static_cast<size_t>(ta ? k * s.M + m : m * s.K + k)]) *
                        b[static_cast<size_t>(tb ? n * s.K + k : k * s.N + n)];
              EXPECT_NEAR(one[static_cast<size_t>(m * s.N + n)], want, static_cast<double>(s.K * s.K) * 0x1p-24);
            }
        }
  }
}

}  // namespace
}  // namespace kiln::cpu
