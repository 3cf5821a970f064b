// Ops::dropout on the CPU: each element is the scalar formula's (kept: x times the factor, in
// the tensor's type; dropped: 0; plus out when accumulating), bit for bit; the kept fraction is
// 1 - p within the binomial's spread; and every layout's piece of a tensor draws the keeps the
// whole tensor draws at those elements (kernels/dropout_mask.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/dropout_mask.h"
#include "kernels/ops.h"
#include "tests/error_of.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

// A mask over sequences of `tokens` tokens, whole (one run from 0), of `features` features.
DropoutMask whole_mask(double p, int64_t tokens, int64_t features) {
  DropoutMask m;
  m.p = p;
  m.seed = 1234;
  m.stream = stable_hash("layers.1.mlp.proj.down.lora_dropout");
  m.first_sample = 17;
  m.tokens = m.seq_len = m.run = tokens;
  m.features = features;
  return m;
}

template <typename T>
std::vector<T> normals(size_t n, uint64_t seed) {
  Random draw(seed);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(draw.normal());
  return v;
}

template <typename T>
void expect_the_formula(DType dtype) {
  const auto ops = make_cpu_ops(3);
  const int64_t N = 12, C = 40;  // 4 sequences of 3 tokens
  const DropoutMask mask = whole_mask(0.3, 3, C);
  const std::vector<T> x = normals<T>(N * C, 1), start = normals<T>(N * C, 2);
  std::vector<T> out(x.size()), sum = start;
  ops->dropout({out.data(), dtype, {N, C}, Device::Cpu}, {const_cast<T*>(x.data()), dtype, {N, C}, Device::Cpu},
               mask, false);
  ops->dropout({sum.data(), dtype, {N, C}, Device::Cpu}, {const_cast<T*>(x.data()), dtype, {N, C}, Device::Cpu},
               mask, true);
  const T factor = static_cast<T>(static_cast<float>(1 / 0.7));
  int64_t kept = 0;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c) {
      // Sample 17 + r / 3, place r % 3 of 3, feature c of C.
      const uint64_t index = static_cast<uint64_t>(((17 + r / 3) * 3 + r % 3) * C + c);
      const bool keep = counter_uniform(1234, mask.stream, index) >= 0.3;
      const size_t i = static_cast<size_t>(r * C + c);
      const T want = keep ? x[i] * factor : T(0);
      kept += keep;
      EXPECT_EQ(std::memcmp(&out[i], &want, sizeof(T)), 0) << "row " << r << " column " << c;
      const T want_sum = start[i] + want;
      EXPECT_EQ(std::memcmp(&sum[i], &want_sum, sizeof(T)), 0) << "row " << r << " column " << c;
    }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, N * C);
}

TEST(CpuDropout, EachElementIsTheFormulasInFp32) { expect_the_formula<float>(DType::F32); }
TEST(CpuDropout, EachElementIsTheFormulasInFp64) { expect_the_formula<double>(DType::F64); }

TEST(CpuDropout, TheKeptFractionIsOneMinusPWithinTheBinomialSpread) {
  // n independent keeps of probability 1 - p: the kept fraction has mean 1 - p and standard
  // deviation sqrt(p (1 - p) / n) (0.0003 at p = 0.1 and n = 10^6); a fair mask lies within
  // 5 of them but once in 1.7 million. Two adapters' masks (two streams) agree on an element
  // with probability p^2 + (1 - p)^2 when independent, within the same bound.
  const auto ops = make_cpu_ops(4);
  const int64_t N = 1000, C = 1000;
  const double n = static_cast<double>(N * C);
  std::vector<float> ones(static_cast<size_t>(N * C), 1.0f), a(ones.size()), b(ones.size());
  const Tensor x{ones.data(), DType::F32, {N, C}, Device::Cpu};
  for (const double p : {0.05, 0.1, 0.5}) {
    DropoutMask mask = whole_mask(p, 10, C);
    ops->dropout({a.data(), DType::F32, {N, C}, Device::Cpu}, x, mask, false);
    mask.stream += 1;
    ops->dropout({b.data(), DType::F32, {N, C}, Device::Cpu}, x, mask, false);
    double kept = 0, agree = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      kept += a[i] != 0;
      agree += (a[i] != 0) == (b[i] != 0);
    }
    EXPECT_NEAR(kept / n, 1 - p, 5 * std::sqrt(p * (1 - p) / n)) << "p=" << p;
    const double q = p * p + (1 - p) * (1 - p);
    EXPECT_NEAR(agree / n, q, 5 * std::sqrt(q * (1 - q) / n)) << "p=" << p;
    EXPECT_EQ(a[static_cast<size_t>(std::find_if(a.begin(), a.end(), [](float v) { return v != 0; }) - a.begin())],
              static_cast<float>(1 / (1 - p)));
  }
}

TEST(CpuDropout, EveryLayoutsPieceDrawsTheWholeTensorsKeeps) {
  // Two sequences of 8 tokens, 12 features, all ones: the whole mask, then the pieces a
  // row-parallel rank (features 4..7 of 12) and a context-parallel rank (cp = 2, rank 1:
  // places 2, 3 and 4, 5 of each sequence) hold.
  const auto ops = make_cpu_ops(2);
  const int64_t T = 8, C = 12;
  std::vector<float> ones(static_cast<size_t>(2 * T * C), 1.0f), whole(ones.size());
  const DropoutMask mask = whole_mask(0.4, T, C);
  ops->dropout({whole.data(), DType::F32, {2 * T, C}, Device::Cpu}, {ones.data(), DType::F32, {2 * T, C}, Device::Cpu},
               mask, false);
  const auto at = [&](int64_t row, int64_t col) { return whole[static_cast<size_t>(row * C + col)]; };

  DropoutMask columns = mask;
  columns.first_feature = 4;
  std::vector<float> piece(static_cast<size_t>(2 * T * 4));
  ops->dropout({piece.data(), DType::F32, {2 * T, 4}, Device::Cpu}, {ones.data(), DType::F32, {2 * T, 4}, Device::Cpu},
               columns, false);
  for (int64_t r = 0; r < 2 * T; ++r)
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(piece[static_cast<size_t>(r * 4 + c)], at(r, 4 + c)) << r << " " << c;

  DropoutMask chunks = mask;
  chunks.tokens = T / 2;
  chunks.run = 2;
  chunks.starts[0] = 2;
  chunks.starts[1] = 4;
  std::vector<float> mine(static_cast<size_t>(T * C));
  ops->dropout({mine.data(), DType::F32, {T, C}, Device::Cpu}, {ones.data(), DType::F32, {T, C}, Device::Cpu}, chunks,
               false);
  const int64_t places[] = {2, 3, 4, 5};
  for (int64_t r = 0; r < T; ++r)
    for (int64_t c = 0; c < C; ++c)
      EXPECT_EQ(mine[static_cast<size_t>(r * C + c)], at(r / 4 * T + places[r % 4], c)) << r << " " << c;
}

TEST(CpuDropout, AMaskThatDoesNotFitIsRefused) {
  const auto ops = make_cpu_ops(1);
  std::vector<float> v(24);
  const Tensor x{v.data(), DType::F32, {4, 6}, Device::Cpu};
  DropoutMask mask = whole_mask(1.0, 2, 6);
  EXPECT_EQ(test::error_of([&] { ops->dropout(x, x, mask, false); }), "dropout: p=1.000000 outside [0, 1)");
  mask.p = 0.5;
  mask.first_feature = 1;
  EXPECT_EQ(test::error_of([&] { ops->dropout(x, x, mask, false); }),
            "dropout: the mask does not name x's [4, 6] elements");
  mask.first_feature = 0;
  EXPECT_EQ(test::error_of([&] { ops->dropout(x, x, mask, false); }), "(no error)");
}

}  // namespace
}  // namespace kiln
