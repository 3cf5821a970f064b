#include "trainer/train/alert_rules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace kiln {
namespace {

AlertsConfig settings() {
  AlertsConfig c;
  c.window = 20;
  c.min_samples = 5;
  return c;
}

// A healthy run's logged step: a loss falling slowly with noise, steady throughput, two
// ranks working alike.
LoggedStep healthy(int64_t step, std::mt19937& noise) {
  std::normal_distribution<double> jitter(0, 1);
  LoggedStep s;
  s.step = step;
  s.loss = 5.0 - 0.01 * static_cast<double>(step) + 0.05 * jitter(noise);
  s.grad_norm = 1.0 + 0.1 * jitter(noise);
  s.tokens_per_s = 10000 + 500 * jitter(noise);
  s.ranks = {{20 + jitter(noise), 1 << 20}, {20 + jitter(noise), 1 << 20}};
  return s;
}

std::vector<RankLimits> two_ranks() { return {{"alpha", int64_t{1} << 30}, {"beta", int64_t{1} << 30}}; }

std::vector<std::string> rules_of(const std::vector<FiredAlert>& fired) {
  std::vector<std::string> rules;
  for (const FiredAlert& a : fired) rules.push_back(a.rule);
  return rules;
}

TEST(AlertRules, AHealthyNoisyRunFiresNothing) {
  AlertRules rules(settings(), two_ranks());
  std::mt19937 noise(7);
  for (int64_t step = 1; step <= 500; ++step) {
    const LoggedStep s = healthy(step, noise);
    EXPECT_EQ(rules.observe(s).size(), 0u) << "step " << step;
    EXPECT_FALSE(rules.check_numbers(step, s.loss, s.grad_norm, false));
  }
  EXPECT_FALSE(rules.check_stall(500, 30));
}

TEST(AlertRules, ALossSpikeFiresOncePerEpisode) {
  AlertRules rules(settings(), two_ranks());
  std::mt19937 noise(1);
  std::vector<std::string> fired;
  for (int64_t step = 1; step <= 60; ++step) {
    LoggedStep s = healthy(step, noise);
    // Two spikes in a row are one episode; the third, after a healthy step, another.
    if (step == 30 || step == 31 || step == 33) s.loss *= 10;
    for (const FiredAlert& a : rules.observe(s)) {
      fired.push_back(a.rule + "@" + std::to_string(*a.step));
      if (step == 30) {
        EXPECT_GT(a.value, a.threshold);
        EXPECT_NE(a.message.find("standard deviations above the mean"), std::string::npos) << a.message;
      }
    }
  }
  EXPECT_EQ(fired, (std::vector<std::string>{"loss_spike@30", "loss_spike@33"}));
}

TEST(AlertRules, ARewindForgetsTheAbandonedStepsAndTheSpikeMayFireAgain) {
  AlertRules rules(settings(), two_ranks());
  LoggedStep s;
  s.grad_norm = 1;
  s.tokens_per_s = 100;
  const auto loss_at = [&](int64_t step, double loss) {
    s.step = step;
    s.loss = loss;
    return rules_of(rules.observe(s));
  };
  // Flat at 4 to step 10, then a slow climb to 5 at step 20 that never stands out by itself.
  for (int64_t step = 1; step <= 20; ++step)
    EXPECT_TRUE(loss_at(step, step <= 10 ? 4.0 : 4.0 + 0.1 * static_cast<double>(step - 10)).empty()) << step;
  AlertRules climbed = rules;
  // After the climb 5.5 is 3.6 deviations above the window's mean: no spike.
  s.step = 21;
  s.loss = 5.5;
  EXPECT_TRUE(climbed.observe(s).empty());
  // Gone back to step 10, it is judged against the flat loss alone.
  rules.rewound_to(10);
  EXPECT_EQ(loss_at(11, 5.5), std::vector<std::string>{"loss_spike"});
  EXPECT_TRUE(loss_at(12, 5.5).empty()) << "one episode";
  // The same spike again after another rewind: a new episode.
  rules.rewound_to(10);
  EXPECT_EQ(loss_at(11, 5.5), std::vector<std::string>{"loss_spike"});
}

TEST(AlertRules, SpikesWaitForTheirSamplesAndAFlatLossNeedsARealJump) {
  AlertRules rules(settings(), two_ranks());
  LoggedStep s;
  s.grad_norm = 1;
  s.tokens_per_s = 100;
  // The first steps of a run fall fast: too few samples to judge.
  for (int64_t step = 1; step <= 4; ++step) {
    s.step = step;
    s.loss = 10.0 / static_cast<double>(step) + (step == 4 ? 50 : 0);
    EXPECT_TRUE(rules.observe(s).empty()) << step;
  }
  AlertRules flat(settings(), two_ranks());
  for (int64_t step = 1; step <= 20; ++step) {
    s.step = step;
    s.loss = 4.0;
    EXPECT_TRUE(flat.observe(s).empty());
  }
  s.step = 21;
  s.loss = 4.1;  // 2.5% up on a loss that did not move: within the floor of 1% spread
  EXPECT_TRUE(flat.observe(s).empty());
  s.step = 22;
  s.loss = 6.0;
  EXPECT_EQ(rules_of(flat.observe(s)), std::vector<std::string>{"loss_spike"});
}

TEST(AlertRules, AGradientNormSpike) {
  AlertRules rules(settings(), two_ranks());
  std::mt19937 noise(3);
  for (int64_t step = 1; step <= 20; ++step) EXPECT_TRUE(rules.observe(healthy(step, noise)).empty());
  LoggedStep s = healthy(21, noise);
  s.grad_norm = 40;
  const auto fired = rules.observe(s);
  ASSERT_EQ(rules_of(fired), std::vector<std::string>{"grad_spike"});
  EXPECT_DOUBLE_EQ(fired[0].value, 40);
  EXPECT_NE(fired[0].message.find("gradient norm 40 at step 21"), std::string::npos) << fired[0].message;
}

TEST(AlertRules, ThroughputBelowAFractionOfItsMedianForStepsInARowUntilItRecovers) {
  AlertsConfig c = settings();
  c.throughput_fraction = 0.5;
  c.throughput_steps = 3;
  AlertRules rules(c, two_ranks());
  std::mt19937 noise(5);
  std::vector<int64_t> fired_at;
  for (int64_t step = 1; step <= 90; ++step) {
    LoggedStep s = healthy(step, noise);
    if (step >= 30 && step < 40) s.tokens_per_s = 3000;  // slowed for ten logged steps
    if (step >= 50 && step < 60 && step % 3 == 0) s.tokens_per_s = 2000;  // hiccups, two steps apart
    if (step >= 70 && step < 80 && step != 75) s.tokens_per_s = 2000;  // one good step in a slowdown
    for (const FiredAlert& a : rules.observe(s)) {
      EXPECT_EQ(a.rule, "throughput");
      EXPECT_NEAR(a.threshold, 5000, 300);
      fired_at.push_back(*a.step);
    }
  }
  // Once per slowdown, on its third step; never for the hiccups.
  EXPECT_EQ(fired_at, (std::vector<int64_t>{32, 72}));
}

TEST(AlertRules, AStragglerAfterKStepsNamesItsRankAndHost) {
  AlertsConfig c = settings();
  c.straggler_fraction = 0.2;
  c.straggler_steps = 3;
  AlertRules rules(c, {{"alpha", 0}, {"beta", 0}, {"gamma", 0}, {"delta", 0}});
  std::vector<std::string> fired;
  for (int64_t step = 1; step <= 12; ++step) {
    LoggedStep s;
    s.step = step;
    s.loss = 3;
    s.grad_norm = 1;
    s.tokens_per_s = 100;
    // Rank 2 is slow at steps 2-3 (too short to be a straggler), then from step 5 on.
    const bool slow = step == 2 || step == 3 || step >= 5;
    s.ranks = {{20, 0}, {21, 0}, {slow ? 30.0 : 20.0, 0}, {19, 0}};
    for (const FiredAlert& a : rules.observe(s)) {
      fired.push_back(a.rule + "@" + std::to_string(*a.step));
      EXPECT_EQ(a.rank, 2);
      EXPECT_DOUBLE_EQ(a.value, 30);
      EXPECT_DOUBLE_EQ(a.threshold, 24);  // the median rank's 20 ms and 20%
      EXPECT_EQ(a.message,
                "rank 2 on gamma worked 30.0 ms a step, 1.50x the median rank's 20.0 ms, for 3 logged steps in a row");
    }
  }
  EXPECT_EQ(fired, std::vector<std::string>{"straggler@7"});
}

TEST(AlertRules, OfTwoRanksTheSlowOneIsTheStraggler) {
  AlertsConfig c = settings();
  c.straggler_steps = 1;
  AlertRules rules(c, two_ranks());
  LoggedStep s;
  s.step = 10;
  s.ranks = {{10, 0}, {50, 0}};
  const auto fired = rules.observe(s);
  ASSERT_EQ(rules_of(fired), std::vector<std::string>{"straggler"});
  EXPECT_EQ(fired[0].rank, 1);
}

TEST(AlertRules, AFractionOfAMillisecondIsNoStraggler) {
  AlertsConfig c = settings();
  c.straggler_steps = 1;
  AlertRules rules(c, two_ranks());
  LoggedStep s;
  s.step = 1;
  s.ranks = {{0.3, 0}, {0.9, 0}};  // three times the median, and 0.6 ms: scheduler noise
  EXPECT_TRUE(rules.observe(s).empty());
}

TEST(AlertRules, MemoryNearARanksLimitOncePerRank) {
  AlertsConfig c = settings();
  c.memory_fraction = 0.9;
  AlertRules rules(c, {{"alpha", 1000}, {"beta", 0}});
  LoggedStep s;
  s.ranks = {{1, 800}, {1, 999}};  // beta's limit is unknown: never judged
  s.step = 1;
  EXPECT_TRUE(rules.observe(s).empty());
  s.ranks[0].memory_bytes = 950;
  s.step = 2;
  const auto fired = rules.observe(s);
  ASSERT_EQ(rules_of(fired), std::vector<std::string>{"memory"});
  EXPECT_EQ(fired[0].rank, 0);
  EXPECT_DOUBLE_EQ(fired[0].value, 950);
  EXPECT_DOUBLE_EQ(fired[0].threshold, 900);
  s.step = 3;
  EXPECT_TRUE(rules.observe(s).empty());
}

TEST(AlertRules, NotANumberInTheLossOrTheGradientNorm) {
  AlertRules rules(settings(), two_ranks());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(rules.check_numbers(1, 3.0, inf, /*skipped=*/true));  // the loss scaler's business
  const auto norm = rules.check_numbers(2, 3.0, inf, false);
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm->message, "gradient norm is infinite at step 2");
  EXPECT_FALSE(rules.check_numbers(3, nan, nan, false));  // the same episode
  EXPECT_FALSE(rules.check_numbers(4, 3.0, 1.0, false));
  const auto loss = rules.check_numbers(5, nan, 1.0, false);
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->rule, "nan");
  EXPECT_EQ(loss->message, "loss is nan at step 5");
}

TEST(AlertRules, AStallFiresOnceUntilAStepFinishes) {
  AlertsConfig c = settings();
  c.stall_s = 10;
  AlertRules rules(c, two_ranks());
  EXPECT_FALSE(rules.check_stall(4, 9.5));
  const auto stall = rules.check_stall(4, 10.5);
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->step, 5);
  EXPECT_EQ(stall->message, "step 5 has run 10.5 s without finishing (alerts.stall_s=10)");
  EXPECT_FALSE(rules.check_stall(4, 30));
  rules.step_finished();
  EXPECT_TRUE(rules.check_stall(5, 11));
}

TEST(AlertRules, ZeroTurnsARuleOff) {
  AlertsConfig c = settings();
  c.loss_zscore = c.grad_zscore = c.throughput_fraction = c.straggler_fraction = c.memory_fraction = c.stall_s = 0;
  AlertRules rules(c, {{"alpha", 10}, {"beta", 10}});
  for (int64_t step = 1; step <= 30; ++step) {
    LoggedStep s;
    s.step = step;
    s.loss = step == 30 ? 1e6 : 1;
    s.grad_norm = step == 30 ? 1e6 : 1;
    s.tokens_per_s = step == 30 ? 1 : 1000;
    s.ranks = {{1, 100}, {100, 100}};
    EXPECT_TRUE(rules.observe(s).empty());
  }
  EXPECT_FALSE(rules.check_stall(1, 1e6));
}

}  // namespace
}  // namespace kiln
