// The counter-based generator parameters start from (counter_random.h): Philox4x32-10 against
// Random123's published known answers, the logarithm and the normal quantile against long
// double references, and the normals' moments and tails against the standard normal's.
#include "kernels/counter_random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln {
namespace {

// Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, output.
TEST(CounterRandom, PhiloxGivesTheKnownAnswers) {
  struct Kat {
    Philox4x32 counter;
    uint32_t k0, k1;
    Philox4x32 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 got = philox4x32_10(k.counter, k.k0, k.k1);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(got.v[w], k.want.v[w]) << "word " << w;
  }
}

// Number i of stream s under seed k is Philox's block for counter (i, s) under key k, its
// first two words the top 52 bits of an odd multiple of 2^-53.
TEST(CounterRandom, UniformIsThePhiloxBlockOfTheIndexAndStream) {
  const uint64_t words = 0xe169c58d6627e8d5ull;  // the first known answer's words 1, 0
  EXPECT_EQ(counter_uniform(0, 0, 0), static_cast<double>(2 * (words >> 12) + 1) * 0x1p-53);
  const uint64_t third = 0x94fdccebd16cfe09ull;  // the third's, counter (i, s) and key k below
  EXPECT_EQ(counter_uniform(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull),
            static_cast<double>(2 * (third >> 12) + 1) * 0x1p-53);
}

// The double nearest to a long double, and how many ulps of it `got` is away.
double ulps_from(double got, long double exact) {
  const double nearest = static_cast<double>(exact);
  const long double ulp = std::nextafter(std::abs(nearest), INFINITY) - std::abs(nearest);
  return static_cast<double>(std::abs(static_cast<long double>(got) - exact) / ulp);
}

// Within 1 ulp, over every binade the normal transform reaches (down to 2^-53) and beyond.
TEST(CounterRandom, LogIsWithinOneUlp) {
  double worst = 0;
  for (int e = -70; e <= 70; ++e)
    for (int j = 0; j < 2000; ++j) {
      const double x = std::ldexp(1.0 + j / 2000.0, e);
      if (x == 1.0) continue;
      worst = std::max(worst, ulps_from(counter_log(x), std::log(static_cast<long double>(x))));
    }
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(counter_log(1.0), 0.0);
}

// The exact quantile near x: one Newton step on the long double distribution function.
long double refined_quantile(double x, double p) {
  const long double lx = x;
  const long double cdf = 0.5L * std::erfc(-lx / std::sqrt(2.0L));
  const long double density = std::exp(-lx * lx / 2) / std::sqrt(2 * 3.14159265358979323846264338L);
  return lx - (cdf - p) / density;
}

// AS 241 with our logarithm: within a few units of 1e-16 of the exact quantile, from the
// centre to the farthest tail a 52-bit uniform reaches (|x| up to 8.2).
TEST(CounterRandom, NormalQuantileIsAccurate) {
  std::vector<double> ps;
  for (int j = 1; j < 4096; j += 2) ps.push_back(j / 4096.0);
  for (int e = 3; e <= 53; ++e)
    for (int j = 0; j < 16; ++j) ps.push_back(std::ldexp(1.0 + j / 16.0, -e));
  double worst = 0;
  for (double p : ps)
    for (double tail : {p, 1.0 - p}) {
      const double x = normal_quantile(tail);
      worst = std::max(worst, static_cast<double>(std::abs((x - refined_quantile(x, tail)) / x)));
    }
  EXPECT_LT(worst, 1e-15);
}

// u and 1 - u are drawn alike, and give x and -x exactly.
TEST(CounterRandom, NormalIsExactlySymmetric) {
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = counter_uniform(3, 4, i);
    EXPECT_EQ(normal_quantile(1.0 - u), -normal_quantile(u)) << u;
  }
  EXPECT_EQ(normal_quantile(0x1p-53), -normal_quantile(1 - 0x1p-53));
}

// 2^20 draws: mean, variance, skewness and excess kurtosis within 5 standard errors of the
// standard normal's (0, 1, 0, 0), and the share beyond 1, 2, 3 and 4 standard deviations
// within 5 binomial standard errors. Fixed seed: the numbers are the same every run.
TEST(CounterRandom, NormalHasTheStandardNormalsMomentsAndTails) {
  const int64_t n = 1 << 20;
  double m1 = 0, m2 = 0, m3 = 0, m4 = 0;
  int64_t beyond[5] = {};
  for (int64_t i = 0; i < n; ++i) {
    const double z = counter_normal(42, 7, static_cast<uint64_t>(i));
    m1 += z;
    m2 += z * z;
    m3 += z * z * z;
    m4 += z * z * z * z;
    for (int k = 1; k <= 4; ++k) beyond[k] += std::abs(z) > k;
  }
  const double N = static_cast<double>(n), se = 5 / std::sqrt(N);
  m1 /= N;
  m2 /= N;
  m3 /= N;
  m4 /= N;
  const double var = m2 - m1 * m1;
  EXPECT_NEAR(m1, 0.0, se);
  EXPECT_NEAR(var, 1.0, se * std::sqrt(2.0));
  EXPECT_NEAR(m3 / std::pow(var, 1.5), 0.0, se * std::sqrt(6.0));
  EXPECT_NEAR(m4 / (var * var) - 3, 0.0, se * std::sqrt(24.0));
  for (int k = 1; k <= 4; ++k) {
    const double p = std::erfc(k / std::sqrt(2.0));
    EXPECT_NEAR(static_cast<double>(beyond[k]) / N, p, 5 * std::sqrt(p * (1 - p) / N)) << "beyond " << k;
  }
}

// Each index, stream and seed draws its own number; the same triple always the same.
TEST(CounterRandom, NormalIsAPureFunctionOfSeedStreamAndIndex) {
  EXPECT_EQ(counter_normal(1, 2, 3), counter_normal(1, 2, 3));
  EXPECT_NE(counter_normal(1, 2, 3), counter_normal(1, 2, 4));
  EXPECT_NE(counter_normal(1, 2, 3), counter_normal(1, 3, 3));
  EXPECT_NE(counter_normal(1, 2, 3), counter_normal(2, 2, 3));
  // Indices past 2^32 use the counter's second word.
  EXPECT_NE(counter_normal(1, 2, 3), counter_normal(1, 2, 3 + (1ull << 32)));
}

// RandomRuns walks rows of columns: element e's place and index.
TEST(CounterRandom, RunsMapElementsToPlacesAndIndices) {
  const RandomRuns runs{3, 4, 10, 100, 40};
  EXPECT_EQ(runs.count(), 12);
  EXPECT_EQ(runs.offset(0), 0);
  EXPECT_EQ(runs.index(0), 100u);
  EXPECT_EQ(runs.offset(5), 11);
  EXPECT_EQ(runs.index(5), 141u);
  EXPECT_EQ(runs.offset(11), 23);
  EXPECT_EQ(runs.index(11), 183u);
}

}  // namespace
}  // namespace kiln
