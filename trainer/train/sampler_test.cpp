// The sampler: greedy picks the argmax; top-k and top-p keep exactly the sets they promise,
// renormalised; draws with a fixed seed are repeatable and land only inside the set, at
// the set's probabilities; bad options are refused by name.
#include "trainer/train/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

using test::error_of;

std::vector<int32_t> ids_of(const std::vector<Candidate>& set) {
  std::vector<int32_t> ids;
  for (const Candidate& c : set) ids.push_back(c.id);
  return ids;
}

// Logits whose softmax at temperature 1 is exactly `probabilities`.
std::vector<float> logits_of(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

TEST(Sampler, GreedyPicksTheFirstLargestLogit) {
  Sampler greedy({0.0, 0, 1.0}, 1);
  const std::vector<float> logits = {1, 3, 2, 3, 0};
  EXPECT_EQ(ids_of(greedy.candidates(logits)), (std::vector<int32_t>{1}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(greedy.next(logits), 1);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  Sampler sampler({1.0, 2, 1.0}, 1);
  const auto& set = sampler.candidates(std::vector<float>{1, 3, 2, 3, 0});
  EXPECT_EQ(ids_of(set), (std::vector<int32_t>{1, 3}));  // a tie goes to the lower id first
  EXPECT_DOUBLE_EQ(set[0].probability, 0.5);
  EXPECT_DOUBLE_EQ(set[1].probability, 0.5);
}

TEST(Sampler, TopPKeepsTheSmallestSetThatReachesP) {
  const std::vector<float> logits = logits_of({0.15, 0.5, 0.05, 0.3});
  const std::map<double, std::vector<int32_t>> expected = {
      {0.4, {1}}, {0.75, {1, 3}}, {0.85, {1, 3, 0}}, {0.99, {1, 3, 0, 2}}};
  for (const auto& [p, ids] : expected) {
    Sampler sampler({1.0, 0, p}, 1);
    const auto& set = sampler.candidates(logits);
    EXPECT_EQ(ids_of(set), ids) << "top_p " << p;
    double total = 0;
    for (const Candidate& c : set) total += c.probability;
    EXPECT_NEAR(total, 1.0, 1e-12) << "top_p " << p;
  }
  // Top-k cuts first, then top-p over what is left: {1, 3} renormalised is 0.625, 0.375.
  Sampler both({1.0, 2, 0.6}, 1);
  EXPECT_EQ(ids_of(both.candidates(logits)), (std::vector<int32_t>{1}));
  Sampler wider({1.0, 2, 0.7}, 1);
  EXPECT_EQ(ids_of(wider.candidates(logits)), (std::vector<int32_t>{1, 3}));
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits = logits_of({0.2, 0.8});
  Sampler hot({2.0, 0, 1.0}, 1), cold({0.5, 0, 1.0}, 1);
  EXPECT_NEAR(hot.candidates(logits)[1].probability,
              std::sqrt(0.8) / (std::sqrt(0.2) + std::sqrt(0.8)), 1e-7);
  EXPECT_NEAR(cold.candidates(logits)[1].probability, 0.64 / (0.04 + 0.64), 1e-7);
}

// Draws land only in the set, at its probabilities (20000 draws: a few thousandths off).
TEST(Sampler, DrawsFollowTheCutDistribution) {
  const std::vector<float> logits = logits_of({0.05, 0.3, 0.1, 0.25, 0.2, 0.1});
  for (const SamplingOptions options :
       {SamplingOptions{1.0, 3, 1.0}, SamplingOptions{1.0, 0, 0.7}, SamplingOptions{0.7, 4, 0.9}}) {
    Sampler sampler(options, 42);
    std::map<int32_t, double> want;
    for (const Candidate& c : sampler.candidates(logits)) want[c.id] = c.probability;
    std::map<int32_t, double> seen;
    constexpr int kDraws = 20000;
    for (int i = 0; i < kDraws; ++i) {
      const int32_t id = sampler.next(logits);
      ASSERT_TRUE(want.count(id)) << "drew " << id << " outside the set (top_k " << options.top_k
                                  << ", top_p " << options.top_p << ")";
      seen[id] += 1.0 / kDraws;
    }
    for (const auto& [id, p] : want) EXPECT_NEAR(seen[id], p, 0.015) << "id " << id;
  }
}

TEST(Sampler, TheSameSeedDrawsTheSameTokens) {
  const std::vector<float> logits = logits_of({0.1, 0.2, 0.3, 0.4});
  Sampler a({0.9, 0, 0.95}, 7), b({0.9, 0, 0.95}, 7), c({0.9, 0, 0.95}, 8);
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 64; ++i) {
    da.push_back(a.next(logits));
    db.push_back(b.next(logits));
    dc.push_back(c.next(logits));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(Sampler, BadOptionsAreRefusedByName) {
  EXPECT_EQ(error_of([] {
              check_sampling({-1.0, 0, 1.0});
            }),
            "--temperature must be 0 (greedy) or more, got -1");
  EXPECT_EQ(error_of([] {
              check_sampling({1.0, -2, 1.0});
            }),
            "--top-k must be 0 (off) or more, got -2");
  EXPECT_EQ(error_of([] { check_sampling({1.0, 0, 0.0}); }), "--top-p must be in (0, 1], got 0");
  EXPECT_EQ(error_of([] { check_sampling({1.0, 0, 1.5}); }), "--top-p must be in (0, 1], got 1.5");
}

}  // namespace
}  // namespace kiln
