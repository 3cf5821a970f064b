// End-to-end: kiln plan ranks layouts and sizes them as the trainer allocates (the memory
// it plans for a layout is the memory `kiln train` reports on it), --json holds the same,
// kiln train --layout auto takes the fastest, and bad input is one line and a non-zero exit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "base/human_format.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

nlohmann::json plan_json(const std::string& args) {
  const CommandResult r = run_command(kiln + " plan --json" + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(PlanCli, RanksLayoutsFastestFirstWithEachRanksMemory) {
  const nlohmann::json plan = plan_json(" --gpus 8 --gpu h100 --top 4");
  EXPECT_EQ(plan["devices"], 8);
  ASSERT_EQ(plan["layouts"].size(), 4u);
  double last = 0;
  for (const nlohmann::json& l : plan["layouts"]) {
    EXPECT_GE(l["step_s"].get<double>(), last);
    last = l["step_s"].get<double>();
    // The total is every arena's bytes, those of the layout's own (the sharded layouts' unit
    // windows, the recomputed arena) among them.
    const nlohmann::json& a = l["memory"]["arenas"];
    for (const char* arena : {"parameters", "gradients", "activations", "scratch", "op workspace", "optimizer"})
      EXPECT_TRUE(a.contains(arena)) << arena;
    size_t sum = 0;
    for (const auto& [name, bytes] : a.items()) sum += bytes.get<size_t>();
    EXPECT_EQ(l["memory"]["total_bytes"].get<size_t>(), sum);
    EXPECT_GT(l["tokens_per_s"].get<double>(), 0);
  }
  const CommandResult table = run_command(kiln + " plan --gpus 8 --top 2");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("layouts considered: 2 fit and are shown"), std::string::npos) << table.output;
  EXPECT_TRUE(std::regex_search(table.output, std::regex("\n *1  " + plan["layouts"][0]["layout"].get<std::string>() + " ")))
      << table.output;
}

TEST(PlanCli, PlansTheMemoryTheTrainerReportsOnTheLayout) {
  const std::string dir = fresh_dir("plan_cli");
  const std::string layout = " --set parallel.tp=2 --set parallel.sequence_parallel=true --set train.recompute=selective"
                             " --set backend.threads=1";
  const nlohmann::json plan = plan_json(" --gpu cpu --gpus 2 --this-layout" + small_run(prepare_corpus(dir)) + layout);
  ASSERT_EQ(plan["layouts"].size(), 1u);
  const CommandResult run = run_command(mpirun_command(2) + kiln + " train --no-store" + small_run(prepare_corpus(dir)) +
                                        layout + " --set train.steps=1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string total = human_bytes(plan["layouts"][0]["memory"]["total_bytes"].get<size_t>());
  EXPECT_NE(run.output.find("| total " + total + "\n"), std::string::npos) << total << "\n" << run.output;
}

TEST(PlanCli, TrainLayoutAutoTakesTheFastestFittingLayout) {
  const std::string dir = fresh_dir("plan_cli_auto");
  const std::string run_args = small_run(prepare_corpus(dir)) + " --set train.steps=2";
  const nlohmann::json plan = plan_json(" --gpu cpu --gpus 1 --top 1" + run_args);
  const CommandResult run = run_command(kiln + " train --no-store --layout auto" + run_args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("kiln: layout auto: " + plan["layouts"][0]["layout"].get<std::string>() +
                            " for 1 rank of cpu: "),
            std::string::npos)
      << run.output;
}

TEST(PlanCli, TimelineDrawsTheConfigsOwnScheduleRankByRank) {
  const CommandResult r =
      run_command(kiln + " plan --gpus 2 --gpu cpu --set parallel.pp=2 --set parallel.schedule=zbv --timeline");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The tiny config's global batch of 32 in micro-batches of 8. The first rank runs forwards
  // until micro-batch 0 comes back down the V (rank 1's two chunks, units 1 and 2), then its
  // last chunk's forward, input gradient and weight gradient.
  EXPECT_NE(r.output.find("layouts considered: 1 fit"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nzbv schedule over 4 micro-batches:\nrank 0 | F0 F1 F2 f0 i0 w0"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\nrank 1 | "), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\nbubble [0-9.]+% of the step \\([0-9]+ units\\)\n")))
      << r.output;
  const CommandResult json = run_command(kiln + " plan --timeline --json");
  EXPECT_NE(json.exit_code, 0);
  EXPECT_NE(json.output.find("kiln: error: --json excludes --timeline"), std::string::npos) << json.output;
}

TEST(PlanCli, BadInputIsOneLineAndANonZeroExit) {
  const auto error = [](const std::string& args) {
    const CommandResult r = run_command(kiln + " plan" + args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    return r.output;
  };
  EXPECT_EQ(error(" --gpu tpu"), "kiln: error: plan: no device named 'tpu'; known: h100, h200, a100, a100-40gb, cpu\n");
  EXPECT_NE(error(" --gpus 3").find("kiln: error: plan: no layout divides 3 devices"), std::string::npos);
  EXPECT_EQ(error(" --gpus 16 --nodes 3"), "kiln: error: plan: 16 devices do not spread evenly over 3 nodes\n");
  // More model ranks than devices: refused, not divided by zero data-parallel ranks.
  const std::string too_many = error(" --gpus 8 --this-layout --set model.n_layer=8 --set parallel.tp=2 --set parallel.pp=8");
  EXPECT_NE(too_many.find("does not divide, e.g.: tp 2 x cp 1 x pp 8 = 16 ranks do not divide 8 devices\n"),
            std::string::npos)
      << too_many;
  EXPECT_NE(too_many.find("kiln: error: plan: no layout divides 8 devices"), std::string::npos) << too_many;
  EXPECT_NE(error(" --set model.n_layer=2 --set model.d_model=16384 --set model.n_head=128 --gpu a100-40gb")
                .find("kiln: error: plan: no layout fits 1 x a100-40gb"),
            std::string::npos);
  const CommandResult r = run_command(kiln + " train --no-store --layout manual");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output.rfind("kiln: error: --layout: manual not in {auto}", 0), 0u) << r.output;
}

}  // namespace
}  // namespace kiln
