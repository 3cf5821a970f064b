#include "trainer/plan/planner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "tests/error_of.h"
#include "trainer/plan/time_model.h"

namespace kiln {
namespace {

Config tiny(const std::vector<std::string>& settings = {}) {
  std::vector<std::string> all = {"data.paths=[\"unused\"]"};
  all.insert(all.end(), settings.begin(), settings.end());
  return load_config("", all);
}

TEST(RingCollectives, TakeTheRingsShareOfTheBytesAndItsSteps) {
  const LinkSpec link{1e9, 1e-6};
  EXPECT_EQ(ring_all_reduce_s(1e9, 1, link), 0);
  // Nothing to move is no collective: no latency either (a model without experts).
  EXPECT_EQ(ring_all_reduce_s(0, 4, link), 0);
  EXPECT_EQ(ring_gather_s(0, 4, link), 0);
  // 2 (n - 1) / n of the bytes, 2 (n - 1) steps.
  EXPECT_NEAR(ring_all_reduce_s(1e9, 4, link), 1.5 + 6e-6, 1e-12);
  EXPECT_NEAR(ring_gather_s(1e9, 4, link), 0.75 + 3e-6, 1e-12);
}

TEST(DeviceSpecs, KnownByNameAndRefusedOtherwiseInOneLine) {
  EXPECT_EQ(device_spec("H100").name, "h100");
  EXPECT_GT(device_spec("h200").memory_bytes, device_spec("h100").memory_bytes);
  EXPECT_EQ(test::error_of([] { device_spec("tpu"); }),
            "plan: no device named 'tpu'; known: h100, h200, a100, a100-40gb, cpu");
  EXPECT_EQ(test::error_of([] { with_profile(device_spec("cpu"), "/nonexistent.json"); }),
            "plan: cannot read the profile /nonexistent.json");
}

TEST(DeviceSpecs, AProfilesFusedProductsCountAsProducts) {
  // 1 GFLOP of products in 10 ms, half of it fused with its epilogue; 1 GB moved in 5 ms.
  const std::string path = ::testing::TempDir() + "/fused_profile.json";
  std::ofstream(path) << R"({"threads": 2, "ops": [
      {"op": "matmul", "ms_per_step": 5, "flops_per_step": 5e8},
      {"op": "matmul_bias_grad", "ms_per_step": 3, "flops_per_step": 3e8, "bytes_per_step": 1e7},
      {"op": "matmul_bias_gelu", "ms_per_step": 2, "flops_per_step": 2e8, "bytes_per_step": 1e7},
      {"op": "attention_forward", "ms_per_step": 1, "flops_per_step": 1e8},
      {"op": "layernorm_forward", "ms_per_step": 5, "bytes_per_step": 1e9}]})";
  const DeviceSpec cpu = with_profile(device_spec("cpu"), path);
  EXPECT_DOUBLE_EQ(cpu.gemm_flops, 1e11);
  EXPECT_DOUBLE_EQ(cpu.bytes_per_s, 2e11);
}

TEST(TimeModel, MoreDevicesOfTheSameLayoutTrainFasterAndPipelinesPayTheirBubble) {
  const Config c = tiny();
  const DeviceSpec h100 = device_spec("h100");
  const StepPrediction one = predict_step(c, ParallelLayout(c.parallel, 1), h100, 1);
  const StepPrediction four = predict_step(c, ParallelLayout(c.parallel, 4), h100, 4);
  EXPECT_LT(four.step_s, one.step_s);
  EXPECT_EQ(one.data_s, 0);
  EXPECT_GT(four.data_s, 0);
  const double parts = one.compute_s + one.tensor_s + one.context_s + one.expert_s + one.pipeline_s + one.data_s +
                       one.optimizer_s;
  EXPECT_NEAR(one.step_s, parts, 1e-12);
  EXPECT_NEAR(one.tokens_per_s, 32.0 * 128 / one.step_s, 1e-6);
  // pp2 over 4 micro-batches: the bubble is (pp - 1) / (m + pp - 1) of the stage's time.
  const Config piped = tiny({"parallel.pp=2"});
  const StepPrediction pp2 = predict_step(piped, ParallelLayout(piped.parallel, 2), h100, 2);
  EXPECT_GT(pp2.pipeline_s, pp2.compute_s / 4 * 0.99);
}

TEST(TimeModel, ASplitBackwardPaysItsCopiesAndIdlesLess) {
  const DeviceSpec h100 = device_spec("h100");
  const auto predict = [&](const std::string& schedule) {
    const Config c = tiny({"parallel.pp=2", "parallel.schedule=" + schedule});
    return predict_step(c, ParallelLayout(c.parallel, 2), h100, 2);
  };
  const StepPrediction one_f_one_b = predict("1f1b"), zb = predict("zb-h1"), zbv = predict("zbv");
  EXPECT_GT(zb.compute_s, one_f_one_b.compute_s);
  EXPECT_EQ(zbv.compute_s, zb.compute_s);
  // pp 2 over 4 micro-batches: the played-out bubble is 1F1B's 20%, ZB-H1's 14.3%.
  EXPECT_LT(zb.pipeline_s, one_f_one_b.pipeline_s);
}

TEST(Planner, RanksTheZeroBubbleSchedulesWhereTheyRun) {
  PlanRequest r;
  r.config = tiny();
  r.devices = 2;
  r.device = device_spec("h100");
  r.top = 0;
  const Plan plan = make_plan(r);
  std::map<std::string, int> seen;
  for (const PlannedLayout& l : plan.fitting) {
    const ParallelConfig& p = l.config.parallel;
    ++seen[p.schedule];
    if (p.schedule == "1f1b") continue;
    EXPECT_NE(l.name.find(" " + p.schedule), std::string::npos) << l.name;
    EXPECT_EQ(p.pp, 2) << l.name;
    EXPECT_EQ(p.vpp, 1) << l.name;
    EXPECT_LT(shard_level(p), ShardLevel::Gradients) << l.name;
    // DualPipeV takes 2 pp micro-batches or more.
    if (p.schedule == "dualpipev") {
      EXPECT_GE(l.config.train.global_batch / l.config.train.micro_batch, 4) << l.name;
    }
  }
  for (const char* schedule : {"1f1b", "zb-h1", "zbv", "dualpipev"}) EXPECT_GT(seen[schedule], 0) << schedule;
  r.config = tiny({"precision.dtype=fp8"});
  for (const PlannedLayout& l : make_plan(r).fitting) EXPECT_EQ(l.config.parallel.schedule, "1f1b") << l.name;
}

TEST(Planner, RanksFittingLayoutsFastestFirstAndSaysWhyOthersCannotRun) {
  PlanRequest r;
  r.config = tiny();
  r.devices = 8;
  r.device = device_spec("h100");
  r.top = 5;
  const Plan plan = make_plan(r);
  ASSERT_EQ(plan.fitting.size(), 5u);
  for (size_t i = 1; i < plan.fitting.size(); ++i)
    EXPECT_LE(plan.fitting[i - 1].time.step_s, plan.fitting[i].time.step_s);
  for (const PlannedLayout& l : plan.fitting) {
    EXPECT_TRUE(l.sized);
    EXPECT_GT(l.memory.bytes("parameters"), 0u);
    EXPECT_EQ(l.config.parallel.tp * l.config.parallel.cp * l.config.parallel.pp *
                  (8 / (l.config.parallel.tp * l.config.parallel.cp * l.config.parallel.pp)),
              8);
  }
  EXPECT_GT(plan.candidates, 100);
  // The tiny config's 4 heads refuse tp 8; its global batch of 32 refuses dp 8 at micro-batch 8.
  EXPECT_GT(plan.not_dividing, 0);
  EXPECT_EQ(plan.candidates, plan.not_dividing + static_cast<int>(plan.fitting.size() + plan.too_big.size()) +
                                 plan.not_sized);
}

TEST(Planner, TheConfigsOwnLayoutAloneWithThisLayout) {
  PlanRequest r;
  r.config = tiny({"parallel.tp=2", "train.recompute=selective"});
  r.devices = 2;
  r.device = device_spec("cpu");
  r.search = false;
  const Plan plan = make_plan(r);
  ASSERT_EQ(plan.fitting.size(), 1u);
  EXPECT_EQ(plan.fitting[0].name, "tp2.pp1.dp1 mb8 selective");
}

TEST(Planner, BestLayoutRefusesAModelNoLayoutFits) {
  const Config big = tiny({"model.n_layer=2", "model.d_model=16384", "model.n_head=128", "train.global_batch=1",
                           "train.micro_batch=1"});
  const std::string error = test::error_of([&] { best_layout(big, 1, device_spec("a100-40gb")); });
  EXPECT_EQ(error.rfind("plan: no layout of this config fits 1 a100-40gb device; the smallest, ", 0), 0u) << error;
  EXPECT_EQ(test::error_of([&] { best_layout(tiny(), 3, device_spec("h100")); }).rfind(
                "plan: no layout of this config divides 3 devices: ", 0),
            0u);
}

}  // namespace
}  // namespace kiln
