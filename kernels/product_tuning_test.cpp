// The logic around timing a product's candidate algorithms (kernels/product_tuning.h), with a
// fake timer and a fake clock: which key is one product, which candidate wins, what is
// counted and what the banner says. The timing itself needs a GPU (ops_cuda_test.cpp).
#include "kernels/product_tuning.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <unordered_map>
#include <vector>

namespace kiln {
namespace {

TEST(ProductKey, EveryFieldMakesADifferentProduct) {
  ProductKey base;
  base.a_b_type = 14;  // CUDA_R_16BF
  base.c_type = 0;     // CUDA_R_32F
  base.M = 16384, base.N = 768, base.K = 3072, base.lda = 3072, base.ldb = 3072, base.ldc = 768;
  base.align_a = base.align_b = base.align_c = 256;
  const std::vector<std::function<void(ProductKey&)>> changes = {
      [](ProductKey& k) { k.device = 1; },        [](ProductKey& k) { k.a_b_type = 2; },
      [](ProductKey& k) { k.c_type = 14; },       [](ProductKey& k) { k.transpose_a = true; },
      [](ProductKey& k) { k.transpose_b = true; }, [](ProductKey& k) { k.M = 8192; },
      [](ProductKey& k) { k.N = 2304; },          [](ProductKey& k) { k.K = 768; },
      [](ProductKey& k) { k.lda = 4096; },        [](ProductKey& k) { k.ldb = 4096; },
      [](ProductKey& k) { k.ldc = 1024; },        [](ProductKey& k) { k.epilogue = 2; },
      [](ProductKey& k) { k.aux_ld = 768; },      [](ProductKey& k) { k.align_a = 16; },
      [](ProductKey& k) { k.align_b = 16; },      [](ProductKey& k) { k.align_c = 16; },
      [](ProductKey& k) { k.align_bias = 16; },   [](ProductKey& k) { k.align_aux = 16; },
  };
  std::unordered_map<ProductKey, int, ProductKeyHash> plans{{base, 0}};
  for (size_t i = 0; i < changes.size(); ++i) {
    ProductKey key = base;
    changes[i](key);
    EXPECT_FALSE(key == base) << "change " << i;
    plans.emplace(key, static_cast<int>(i) + 1);
  }
  EXPECT_EQ(plans.size(), changes.size() + 1);
  ProductKey same = base;
  EXPECT_TRUE(same == base);
  EXPECT_EQ(ProductKeyHash{}(same), ProductKeyHash{}(base));
  EXPECT_EQ(plans.at(same), 0);
}

TEST(FastestCandidate, IsTheLeastTimeAmongThoseThatRan) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_EQ(fastest_candidate({3e-4, 2e-4, 5e-4}), 1);
  EXPECT_EQ(fastest_candidate({-1, 2e-4, 1e-4}), 2);   // the first could not run
  EXPECT_EQ(fastest_candidate({nan, inf, 4e-4}), 2);   // nor could a time that is not finite
  EXPECT_EQ(fastest_candidate({2e-4, 2e-4}), 0);       // a tie keeps the heuristic's order
  EXPECT_EQ(fastest_candidate({-1, -1}), -1);
  EXPECT_EQ(fastest_candidate({}), -1);
}

// A clock that moves only when a candidate is timed, by the time the fake timer reports.
struct FakeTiming {
  double now = 100;
  std::vector<double> times;  // candidate i's seconds
  std::vector<int> timed;     // the candidates measured, in order
  ProductTuner tuner{[this] { return now; }};
  ProductTuner::Measure measure() {
    return [this](int i) {
      timed.push_back(i);
      now += times[static_cast<size_t>(i)] > 0 ? times[static_cast<size_t>(i)] : 0;
      return times[static_cast<size_t>(i)];
    };
  }
};

TEST(ProductTuner, OffTakesTheHeuristicsFirstUntimed) {
  FakeTiming f;
  f.times = {3e-3, 1e-3};
  EXPECT_EQ(f.tuner.choose(2, f.measure()), 0);
  EXPECT_TRUE(f.timed.empty());
  EXPECT_EQ(f.tuner.tuned(), 0);
  EXPECT_EQ(f.tuner.summary("cuBLASLt"), "");
}

TEST(ProductTuner, OnKeepsTheFastestOfTheFirstEight) {
  FakeTiming f;
  f.tuner.set_enabled(true);
  // The ninth is the fastest, but only the heuristic's first eight are timed.
  f.times = {0.9, 0.5, 0.7, -1, 0.4, 0.8, 0.6, 0.45, 0.1, 0.05};
  EXPECT_EQ(f.tuner.choose(10, f.measure()), 4);
  EXPECT_EQ(f.timed, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(f.tuner.tuned(), 1);
  EXPECT_NEAR(f.tuner.seconds(), 0.9 + 0.5 + 0.7 + 0.4 + 0.8 + 0.6 + 0.45, 1e-12);

  f.times = {0.02, 0.01, 0.03};
  f.timed.clear();
  EXPECT_EQ(f.tuner.choose(3, f.measure()), 1);
  EXPECT_EQ(f.timed.size(), 3u);
  EXPECT_EQ(f.tuner.tuned(), 2);
  EXPECT_EQ(f.tuner.summary("cuBLASLt"),
            "2 shapes tuned in 4.41 s (each the fastest of up to 8 cuBLASLt candidates)");
}

TEST(ProductTuner, OneCandidateOrNoneThatRanKeepsTheFirst) {
  FakeTiming f;
  f.tuner.set_enabled(true);
  f.times = {1e-3};
  EXPECT_EQ(f.tuner.choose(1, f.measure()), 0);
  EXPECT_TRUE(f.timed.empty());  // nothing to choose between: not timed, not counted
  EXPECT_EQ(f.tuner.tuned(), 0);
  f.times = {-1, -1};
  EXPECT_EQ(f.tuner.choose(2, f.measure()), 0);
  EXPECT_EQ(f.tuner.tuned(), 1);
}

TEST(ProductTuner, SaysWhichProductsRanUnfused) {
  FakeTiming f;
  f.tuner.count_unfused();
  EXPECT_EQ(f.tuner.summary("cuBLASLt"),
            "1 product without a fused cuBLASLt kernel ran its bias, GELU or bias gradient as "
            "separate kernels");
  f.tuner.set_enabled(true);
  f.times = {0.25, 0.5};
  f.tuner.choose(2, f.measure());
  f.tuner.count_unfused();
  EXPECT_EQ(f.tuner.summary("cuBLASLt"),
            "1 shape tuned in 0.75 s (each the fastest of up to 8 cuBLASLt candidates); 2 "
            "products without a fused cuBLASLt kernel ran their bias, GELU or bias gradient "
            "as separate kernels");
}

}  // namespace
}  // namespace kiln
