// End-to-end: kiln train records its run in the store, and a live run obeys the commands
// of `kiln runs` from another process; kill -9 leaves a store that opens and reads.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "base/check.h"
#include "base/human_format.h"
#include "base/utf8.h"
#include "store/commands.h"
#include "store/expert_queries.h"
#include "store/metric_queries.h"
#include "store/run_details.h"
#include "store/run_queries.h"
#include "store/sample_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

using namespace std::chrono_literals;
using store::Access;

std::vector<store::MetricRow> metrics_of(store::Database& db, int64_t run) {
  std::vector<store::MetricRow> rows;
  store::for_each_metric(db, run, [&](const store::MetricRow& r) { rows.push_back(r); });
  return rows;
}

// A run that trains until stopped, logging every step at a constant learning rate of 0.001
// (so a new one shows in the rows), checkpointing into dir.
std::string live_run_settings(const std::string& dir) {
  return " --set train.steps=1000000 --set train.log_interval=1 --set train.eval_interval=0"
         " --set train.decay=constant --set train.warmup=0 --set train.lr=0.001"
         " --set train.checkpoint_dir=" + dir + "/checkpoints";
}

// CPU seconds the process has used (user + system), from /proc/PID/stat.
double cpu_seconds(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST(TrainStore, RecordsEveryLoggedStepValidationAndTheEnd) {
  const std::string dir = fresh_dir("train_store_record");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  const CommandResult r =
      run_command(kiln + " train --store " + path + " --name first --tag smoke" + small_run(prefix));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: recording run 1 'first' in " + path), std::string::npos)
      << r.output;

  auto db = store::open_store(path, Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "first");
  const store::RunRecord run = store::get_run(*db, id);
  EXPECT_EQ(run.status, store::RunStatus::Completed);
  EXPECT_EQ(run.tags, std::vector<std::string>{"smoke"});
  EXPECT_EQ(run.backend, "cpu");
  EXPECT_EQ(run.layout, "tp1.pp1.dp1");
  // kiln plan's step for its layout on this CPU, and rank 0's memory as planned and allocated.
  ASSERT_GT(run.planned_step_s, 0);
  ASSERT_TRUE(run.planned_memory_bytes.has_value());
  EXPECT_NE(r.output.find(fmt::format("kiln: planned {:.1f} ms a step and {} on rank 0 (kiln plan); measured memory {}\n",
                                      run.planned_step_s * 1e3, human_bytes(*run.planned_memory_bytes),
                                      human_bytes(*run.planned_memory_bytes))),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(run.host.empty());
  EXPECT_NE(run.device.find("threads"), std::string::npos) << run.device;
  EXPECT_NE(run.command_line.find("train --store " + path + " --name first"), std::string::npos)
      << run.command_line;
  EXPECT_TRUE(run.ended_at.has_value());
  EXPECT_EQ(nlohmann::json::parse(run.config_json)["train"]["steps"], 6);

  // Logged every 2 steps of 4 sequences of 16 tokens.
  const std::vector<store::MetricRow> rows = metrics_of(*db, id);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const store::MetricRow& m = rows[i];
    EXPECT_EQ(m.step, 2 * static_cast<int64_t>(i + 1));
    EXPECT_EQ(m.rank, 0);
    EXPECT_EQ(m.tokens, m.step * 64);
    EXPECT_GT(m.loss, 1.0);
    EXPECT_LT(m.loss, 6.0);
    EXPECT_GT(m.lr, 0);
    EXPECT_GT(m.grad_norm, 0);
    EXPECT_GT(m.tokens_per_s, 0);
    EXPECT_GT(m.tflops, 0);
    EXPECT_TRUE(std::isnan(m.mfu)) << "no MFU without a known peak";
    EXPECT_GT(m.fwd_ms, 0);
    EXPECT_GT(m.bwd_ms, 0);
    EXPECT_GE(m.opt_ms, 0);
    EXPECT_GE(m.data_ms, 0);
    EXPECT_EQ(m.comm_ms, 0);
    ASSERT_TRUE(m.mem_used && m.mem_peak);
    EXPECT_GT(*m.mem_used, 1 << 20);
    EXPECT_GE(*m.mem_peak, *m.mem_used);
    EXPECT_EQ(m.skipped_steps, 0);
  }
  // The stored loss is the one the console printed for the step.
  char printed[32];
  std::snprintf(printed, sizeof printed, "step 6/6 | loss %.4f", rows.back().loss);
  EXPECT_NE(r.output.find(printed), std::string::npos) << r.output;
  // Warm-up to step 2, then cosine: the stored lr is the schedule's.
  EXPECT_DOUBLE_EQ(rows[0].lr, nlohmann::json::parse(run.config_json)["train"]["lr"].get<double>());

  const std::vector<store::ValidRow> valid = store::list_valid(*db, id);
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_EQ(valid[0].step, 3);
  EXPECT_EQ(valid[1].step, 6);
  EXPECT_GT(valid[1].loss, 0);

  const std::vector<store::Event> events = store::list_events(*db, id);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.front().kind, "start");
  EXPECT_EQ(events.back().kind, "end");
  EXPECT_EQ(events.back().message, "completed");

  const std::vector<store::SystemRow> system = store::list_system(*db, id);
  ASSERT_GE(system.size(), 1u);
  ASSERT_TRUE(system[0].rss_bytes.has_value());
  EXPECT_GT(*system[0].rss_bytes, 1 << 20);
  EXPECT_GE(system[0].cpu_percent, 0);
  EXPECT_TRUE(std::isnan(system[0].gpu_util));
  ASSERT_TRUE(system[0].host_mem_used && system[0].host_mem_total);
  EXPECT_GT(*system[0].host_mem_used, *system[0].rss_bytes) << "the machine holds this process and more";
  EXPECT_LT(*system[0].host_mem_used, *system[0].host_mem_total);

  // A sample at each validation step; the last is the end-of-run sample, drawn with the same
  // seed from the same model (as the store keeps text: U+FFFD for bytes that are not UTF-8).
  const std::vector<store::Sample> samples = store::list_samples(*db, id, 10);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].step, 3);
  EXPECT_EQ(samples[1].step, 6);
  EXPECT_EQ(samples[1].prompt, "Doc");
  EXPECT_DOUBLE_EQ(samples[1].temperature, 0.8);
  const std::string heading = "--- sample (temperature 0.8) ---\n";
  const size_t start = r.output.find(heading);
  ASSERT_NE(start, std::string::npos) << r.output;
  const size_t end = r.output.find("\n---\n", start + heading.size());
  ASSERT_NE(end, std::string::npos) << r.output;
  const std::string end_sample = r.output.substr(start + heading.size(), end - start - heading.size());
  EXPECT_EQ("Doc" + samples[1].text, kiln::storable_text(end_sample, 2 * store::kMaxSampleBytes));
}

TEST(TrainStore, NoSamplesWhereEachRankHoldsPartOfTheModel) {
  const std::string dir = fresh_dir("train_store_tp_samples");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  const CommandResult r = run_command(mpirun_command(2) + kiln + " train --store " + path + " --name split" +
                                      small_run(prefix) + " --set parallel.tp=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto db = store::open_store(path, Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "split");
  EXPECT_EQ(store::list_valid(*db, id).size(), 2u);
  EXPECT_TRUE(store::list_samples(*db, id, 10).empty());
}

TEST(TrainStore, AnMoeRunRecordsEveryLayersExpertLoadsFromEveryStage) {
  // Two pipeline stages, one MoE layer each: rank 0 records the other stage's layer too.
  const std::string dir = fresh_dir("train_store_experts");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  const CommandResult r = run_command(
      mpirun_command(2) + kiln + " train --store " + path + " --name moe" + small_run(prefix) +
      " --set model.n_layer=2 --set parallel.pp=2 --set moe.num_experts=4 --set moe.top_k=2"
      " --set moe.capacity_factor=0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: mixture of experts in 2 of 2 layers: 4 experts"), std::string::npos)
      << r.output;
  auto db = store::open_store(path, Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "moe");
  EXPECT_EQ(store::expert_layers(*db, id), (std::vector<int>{0, 1}));
  const std::vector<store::ExpertLoad> loads = store::list_expert_loads(*db, id, {});
  ASSERT_EQ(loads.size(), 6u);  // 2 layers x steps 2, 4, 6
  for (const store::ExpertLoad& load : loads) {
    SCOPED_TRACE("layer " + std::to_string(load.layer) + " step " + std::to_string(load.step));
    ASSERT_EQ(load.tokens.size(), 4u);
    int64_t tokens = 0, dropped = 0;
    for (int64_t t : load.tokens) tokens += t;
    for (int64_t d : load.dropped) dropped += d;
    EXPECT_EQ(tokens, 64 * 2);  // each of the step's 64 tokens takes 2 experts
    // A capacity of half the even share keeps at most half the choices.
    EXPECT_GE(dropped, 64);
    EXPECT_GT(load.aux_loss, 0.5);
    EXPECT_GT(load.router_entropy, 0.0);
    EXPECT_LE(load.router_entropy, std::log(4.0) + 1e-9);
  }
}

// A two-layer run of two ranks with `settings`, recorded in a fresh store as `name`: what it
// printed and its latest metric rows, rank by rank.
struct TwoRankRun {
  CommandResult result;
  std::vector<store::MetricRow> latest;
};
TwoRankRun two_rank_run(const std::string& name, const std::string& settings) {
  const std::string dir = fresh_dir("train_store_" + name);
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  TwoRankRun run;
  run.result = run_command(mpirun_command(2) + kiln + " train --store " + path + " --name " + name +
                           small_run(prefix) + " --set model.n_layer=2" + settings);
  if (run.result.exit_code != 0) return run;
  auto db = store::open_store(path, Access::ReadOnly);
  run.latest = store::run_details(*db, store::resolve_run(*db, name)).latest;
  return run;
}

TEST(TrainStore, AFullyShardedRunSaysSoAndRecordsItsExposedGathers) {
  // Two ranks sharding the weights: the banner says what is sharded, each rank's rows hold
  // the time its gathers and reductions were waited for (within forward and backward), and
  // the end of the run samples nothing, the weights being whole a block at a time.
  const TwoRankRun run = two_rank_run("zero3", " --set parallel.shard=parameters");
  const CommandResult& r = run.result;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: sharded data parallelism (parallel.shard=parameters): each of 2 ranks keeps 1/2 of "
                          "the parameters, gradients and the optimizer state, in 4 units; each block gathered "
                          "before its forward and its backward (the next one's started meanwhile), its gradients "
                          "reduced as its backward ends; the embeddings and the tied head kept whole for the step\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("kiln: no sample: each rank holds 1/2 of the weights (parallel.shard=parameters);"),
            std::string::npos)
      << r.output;
  ASSERT_EQ(run.latest.size(), 2u);
  for (const store::MetricRow& row : run.latest) {
    EXPECT_GE(row.shard_ms, 0.0) << "rank " << row.rank;
    EXPECT_LT(row.shard_ms, row.fwd_ms + row.bwd_ms) << "rank " << row.rank;
    EXPECT_TRUE(std::isnan(row.a2a_ms)) << "rank " << row.rank;
    EXPECT_TRUE(std::isnan(row.pipe_ms)) << "rank " << row.rank;  // no pipeline
  }
}

TEST(TrainStore, APipelineRunRecordsEachStagesWaitForItsNeighbours) {
  // Two stages under ZB-H1: each rank's rows hold the time it waited in receives from the other
  // stage, within its forward and backward time; the last stage waits for activations at the
  // start of every step, so its wait is above zero.
  const TwoRankRun run = two_rank_run("zb", " --set parallel.pp=2 --set parallel.schedule=zb-h1");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  ASSERT_EQ(run.latest.size(), 2u);
  for (const store::MetricRow& row : run.latest) {
    EXPECT_GE(row.pipe_ms, 0.0) << "rank " << row.rank;
    EXPECT_LT(row.pipe_ms, row.fwd_ms + row.bwd_ms) << "rank " << row.rank;
    EXPECT_TRUE(std::isnan(row.shard_ms)) << "rank " << row.rank;
    if (row.rank == 1) {
      EXPECT_GT(row.pipe_ms, 0.0);
    }
  }
}

TEST(TrainStore, MultiTokenPredictionOnTheLastStageRecordsEachDepthsLoss) {
  // Two stages, the two modules on the second: the banner says so, both ranks' rows hold each
  // depth's loss (the first stage's summed from the last's), and the progress line prints the
  // values the store keeps.
  const TwoRankRun run =
      two_rank_run("mtp", " --set model.arch=llama --set parallel.pp=2 --set model.mtp_depth=2 --set model.mtp_loss_weight=0.3");
  const CommandResult& r = run.result;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: multi-token prediction: 2 modules after layer 1, predicting up to 3 tokens ahead, "
                          "loss weight 0.3\n"),
            std::string::npos)
      << r.output;
  ASSERT_EQ(run.latest.size(), 2u);
  const store::MetricRow& first = run.latest[0];
  EXPECT_GT(first.mtp1_loss, 0.0);
  EXPECT_LT(first.mtp1_loss, std::log(257.0) + 1.0);  // near the byte vocabulary's uniform loss, at most
  EXPECT_GT(first.mtp2_loss, 0.0);
  EXPECT_TRUE(std::isnan(first.mtp3_loss));
  EXPECT_TRUE(std::isnan(first.mtp4_loss));
  EXPECT_EQ(run.latest[1].mtp1_loss, first.mtp1_loss);
  EXPECT_EQ(run.latest[1].mtp2_loss, first.mtp2_loss);
  EXPECT_NE(r.output.find(fmt::format("loss {:.4f} (mtp {:.4f} {:.4f}) |", first.loss, first.mtp1_loss, first.mtp2_loss)),
            std::string::npos)
      << r.output;
}

TEST(TrainStore, AnExpertParallelRunStatesItsGroupsAndRecordsEveryRanksTokens) {
  // Two ranks, each holding 2 of the 4 experts: the banner and the run's layout say so, and
  // each logged step's loads count both ranks' tokens.
  const std::string dir = fresh_dir("train_store_expert_parallel");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  const CommandResult r = run_command(mpirun_command(2) + kiln + " train --store " + path + " --name ep" +
                                      small_run(prefix) +
                                      " --set moe.num_experts=4 --set moe.top_k=2 --set parallel.ep=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: expert-parallel groups of 2 among the 2 data-parallel ranks: each rank "
                          "holds 2 of 4 experts a layer and trades tokens with its group by all-to-all\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("kiln: no sample: each rank holds 1/2 of the experts;"), std::string::npos)
      << r.output;
  // The progress line says how much of the step the tokens' trips took.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(step 6/6 \| .* ms/step \([0-9.]+ all-to-all\) \| ETA)")))
      << r.output;
  auto db = store::open_store(path, Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "ep");
  EXPECT_EQ(store::get_run(*db, id).layout, "tp1.pp1.dp2.ep2");
  const std::vector<store::MetricRow> latest = store::run_details(*db, id).latest;
  ASSERT_EQ(latest.size(), 2u);
  for (const store::MetricRow& row : latest) {
    EXPECT_GT(row.a2a_ms, 0.0) << "rank " << row.rank;
    EXPECT_LT(row.a2a_ms, row.fwd_ms + row.bwd_ms) << "rank " << row.rank;
  }
  const std::vector<store::ExpertLoad> loads = store::list_expert_loads(*db, id, {});
  ASSERT_EQ(loads.size(), 3u);  // steps 2, 4, 6
  for (const store::ExpertLoad& load : loads) {
    int64_t tokens = 0;
    for (int64_t t : load.tokens) tokens += t;
    EXPECT_EQ(tokens, 64 * 2) << "step " << load.step;
  }
}

TEST(TrainStore, TensorParallelMoeRunsCountEachTokenOnce) {
  // Split experts (every tensor rank routes the whole micro-batch) and whole experts (each
  // routes its own share, parallel.etp=1, through an expert group over the two tensor ranks):
  // either way each logged step's loads count the step's tokens once.
  const std::string dir = fresh_dir("train_store_expert_tensor_parallel");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  const std::string run = mpirun_command(2) + kiln + " train --store " + path + small_run(prefix) +
                          " --set moe.num_experts=4 --set moe.top_k=2 --set parallel.tp=2";
  const CommandResult split = run_command(run + " --name split");
  ASSERT_EQ(split.exit_code, 0) << split.output;
  const CommandResult whole = run_command(run + " --name whole --set parallel.sequence_parallel=true"
                                          " --set parallel.etp=1 --set parallel.ep=2");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_NE(whole.output.find("kiln: expert-parallel groups of 2 among the 2 tensor and data-parallel ranks "
                              "of a stage (whole experts, parallel.etp=1): each rank holds 2 of 4 experts "
                              "a layer and trades tokens with its group by all-to-all\n"),
            std::string::npos)
      << whole.output;
  auto db = store::open_store(path, Access::ReadOnly);
  EXPECT_EQ(store::get_run(*db, store::resolve_run(*db, "whole")).layout, "tp2.pp1.dp1.ep2.etp1");
  for (const std::string name : {"split", "whole"}) {
    const std::vector<store::ExpertLoad> loads = store::list_expert_loads(*db, store::resolve_run(*db, name), {});
    ASSERT_EQ(loads.size(), 3u) << name;  // steps 2, 4, 6
    for (const store::ExpertLoad& load : loads) {
      int64_t tokens = 0;
      for (int64_t t : load.tokens) tokens += t;
      EXPECT_EQ(tokens, 64 * 2) << name << ", step " << load.step;
      EXPECT_GT(load.aux_loss, 0.9) << name << ", step " << load.step;
    }
  }
}

TEST(TrainStore, DefaultNamesAreUniqueAndATakenNameIsRefused) {
  const std::string dir = fresh_dir("train_store_names");
  const std::string prefix = prepare_corpus(dir), path = dir + "/env.db";
  const std::string train = "KILN_STORE=" + path + " " + kiln + " train" + small_run(prefix);
  ASSERT_EQ(run_command(train).exit_code, 0);
  ASSERT_EQ(run_command(train).exit_code, 0);
  {
    auto db = store::open_store(path, Access::ReadOnly);
    const auto runs = store::list_runs(*db);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_NE(runs[0].name, runs[1].name);
    for (const auto& run : runs) EXPECT_EQ(run.name.rfind("tiny-", 0), 0u) << run.name;
  }
  const std::string taken = store::list_runs(*store::open_store(path, Access::ReadOnly))[0].name;
  const CommandResult r = run_command(train + " --name " + taken);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("a run named '" + taken + "' already exists"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step 1"), std::string::npos) << "refused before training";
  EXPECT_EQ(store::list_runs(*store::open_store(path, Access::ReadOnly)).size(), 2u);
}

TEST(TrainStore, TheDefaultStoreIsInTheWorkingFolderAndNoStoreWritesNone) {
  const std::string dir = fresh_dir("train_store_default");
  const std::string prefix = prepare_corpus(dir);
  const std::string train = "cd " + dir + " && env -u KILN_STORE " + kiln + " train" + small_run(prefix);
  ASSERT_EQ(run_command(train + " --no-store").exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/kiln-runs.db"));
  ASSERT_EQ(run_command(train).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/kiln-runs.db"));
  const CommandResult both = run_command(train + " --no-store --store x.db");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("excludes"), std::string::npos) << both.output;
}

TEST(TrainStore, AFileThatIsNoStoreIsRefusedBeforeTrainingAndLeftAlone) {
  const std::string dir = fresh_dir("train_store_bad");
  const std::string prefix = prepare_corpus(dir), path = dir + "/notes.txt";
  std::ofstream(path) << "my notes, not a database\n";
  const CommandResult r = run_command(kiln + " train --store " + path + small_run(prefix));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("kiln: error: store: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(path), "my notes, not a database\n");
}

TEST(TrainStore, ADivergingRunIsRecordedAsFailedWithTheReason) {
  const std::string dir = fresh_dir("train_store_nan");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  const CommandResult r =
      run_command(kiln + " train --store " + path + " --name boom" + small_run(prefix) +
                  " --set train.lr=1e30 --set train.clip_grad=0 --set train.warmup=0"
                  " --set train.steps=50 --set train.log_interval=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto db = store::open_store(path, Access::ReadOnly);
  const store::RunRecord run = store::get_run(*db, store::resolve_run(*db, "boom"));
  EXPECT_EQ(run.status, store::RunStatus::Failed);
  EXPECT_NE(run.error.find("loss is nan at step"), std::string::npos) << run.error;
  std::set<std::string> kinds;
  for (const auto& e : store::list_events(*db, run.id)) kinds.insert(e.kind);
  EXPECT_TRUE(kinds.count("nan")) << "a nan event";
  EXPECT_TRUE(kinds.count("end"));
}

// Pause, change the learning rate while paused, resume, stop: each from a second process
// with `kiln runs ... --wait`, each applied at a step boundary and recorded.
TEST(TrainStore, ALiveRunPausesResumesTakesANewLearningRateAndStops) {
  const std::string dir = fresh_dir("train_store_steer");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db", log = dir + "/train.log";
  const int pid = start_background(
      kiln + " train --store " + path + " --name live" + small_run(prefix) +
          live_run_settings(dir),
      log);
  ASSERT_TRUE(wait_for_step_after(path, "live", 2)) << read_text(log);

  const CommandResult pause = run_command(kiln + " runs pause live --store " + path + " --wait 30");
  ASSERT_EQ(pause.exit_code, 0) << pause.output << read_text(log);
  const int64_t paused_at = *last_step(path, "live");
  {
    auto db = store::open_store(path, Access::ReadOnly);
    EXPECT_EQ(store::get_run(*db, store::resolve_run(*db, "live")).status, store::RunStatus::Paused);
  }
  // Held at the boundary, and idle: no steps, and almost no CPU, over a second.
  const double cpu_before = cpu_seconds(pid);
  std::this_thread::sleep_for(1s);
  EXPECT_LT(cpu_seconds(pid) - cpu_before, 0.15);
  EXPECT_EQ(*last_step(path, "live"), paused_at);

  const CommandResult set =
      run_command(kiln + " runs set live train.lr_scale=0.5 --store " + path + " --wait 30");
  ASSERT_EQ(set.exit_code, 0) << set.output;
  const CommandResult resume = run_command(kiln + " runs resume live --store " + path + " --wait 30");
  ASSERT_EQ(resume.exit_code, 0) << resume.output;
  ASSERT_TRUE(wait_for_step_after(path, "live", paused_at + 3)) << read_text(log);

  const CommandResult stop = run_command(kiln + " runs stop live --store " + path + " --wait 30");
  ASSERT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
  const std::string output = read_text(log);
  EXPECT_NE(output.find("kiln: paused after step " + std::to_string(paused_at)), std::string::npos)
      << output;
  EXPECT_NE(output.find("kiln: stopped by command after step"), std::string::npos) << output;

  auto db = store::open_store(path, Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "live");
  const store::RunRecord run = store::get_run(*db, id);
  EXPECT_EQ(run.status, store::RunStatus::Stopped);
  // Every step logged once, in order, and training went on from the step it paused at; the
  // steps after the resume ran at half the learning rate.
  const std::vector<store::MetricRow> rows = metrics_of(*db, id);
  ASSERT_GT(rows.size(), static_cast<size_t>(paused_at + 2));
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].step, static_cast<int64_t>(i + 1));
    EXPECT_DOUBLE_EQ(rows[i].lr, rows[i].step <= paused_at ? 0.001 : 0.0005) << rows[i].step;
  }
  const std::vector<store::Command> commands = store::list_commands(*db, id);
  ASSERT_EQ(commands.size(), 4u);
  for (const store::Command& c : commands) EXPECT_EQ(c.status, store::CommandStatus::Applied);
  EXPECT_EQ(commands[0].applied_step, paused_at);
  EXPECT_EQ(commands[1].applied_step, paused_at) << "set while paused";
  EXPECT_EQ(commands[2].applied_step, paused_at) << "resumed at the step it paused at";
  EXPECT_EQ(commands[3].applied_step, rows.back().step) << "the last step is logged";
}

// The same steering on two data-parallel ranks: rank 0 reads the commands and both ranks
// pause, take the new learning rate and stop at the same step.
TEST(TrainStore, TwoRanksPauseTakeANewLearningRateAndStopTogether) {
#ifndef KILN_HAVE_MPI
  GTEST_SKIP() << "skipped: built without MPI";
#endif
  const std::string dir = fresh_dir("train_store_steer_dp2");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db", log = dir + "/train.log";
  const int pid = start_background(
      mpirun_command(2) + kiln + " train --store " + path + " --name live2" + small_run(prefix) +
          live_run_settings(dir),
      log);
  ASSERT_TRUE(wait_for_step_after(path, "live2", 2)) << read_text(log);
  ASSERT_EQ(run_command(kiln + " runs pause live2 --store " + path + " --wait 30").exit_code, 0)
      << read_text(log);
  const int64_t paused_at = *last_step(path, "live2");
  ASSERT_EQ(run_command(kiln + " runs set live2 train.lr_scale=0.5 --store " + path + " --wait 30")
                .exit_code,
            0);
  ASSERT_EQ(run_command(kiln + " runs resume live2 --store " + path + " --wait 30").exit_code, 0);
  ASSERT_TRUE(wait_for_step_after(path, "live2", paused_at + 3)) << read_text(log);
  ASSERT_EQ(run_command(kiln + " runs stop live2 --store " + path + " --wait 30").exit_code, 0);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);

  auto db = store::open_store(path, Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "live2");
  EXPECT_EQ(store::get_run(*db, id).status, store::RunStatus::Stopped);
  // Both ranks at every step, in order, at half the learning rate after the pause: had a
  // rank missed the broadcast, the other would have waited for it forever.
  const std::vector<store::MetricRow> rows = metrics_of(*db, id);
  ASSERT_GT(rows.size(), static_cast<size_t>(2 * (paused_at + 2)));
  ASSERT_EQ(rows.size() % 2, 0u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].step, static_cast<int64_t>(i / 2 + 1));
    EXPECT_EQ(rows[i].rank, static_cast<int>(i % 2));
    EXPECT_DOUBLE_EQ(rows[i].lr, rows[i].step <= paused_at ? 0.001 : 0.0005) << rows[i].step;
  }
}

// kill -9 at different moments: the store opens, passes SQLite's integrity check, holds
// every step up to the last commit without gaps, and the run reads as lost once its
// heartbeat is stale.
TEST(TrainStore, KillNineLeavesAReadableStoreAndTheRunReadsAsLost) {
  const std::string dir = fresh_dir("train_store_kill");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  for (int round = 0; round < 3; ++round) {
    const std::string name = "killed-" + std::to_string(round), log = dir + "/" + name + ".log";
    const int pid = start_background(kiln + " train --store " + path + " --name " + name +
                                         small_run(prefix) +
                                         " --set train.steps=1000000 --set train.log_interval=1",
                                     log);
    ASSERT_TRUE(wait_for_step_after(path, name, 2 + 7 * round)) << read_text(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(37 * round));
    kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);

    auto db = store::open_store(path, Access::ReadOnly);
    EXPECT_EQ(db->query_text("PRAGMA integrity_check"), "ok");
    const int64_t id = store::resolve_run(*db, name);
    const std::vector<store::MetricRow> rows = metrics_of(*db, id);
    ASSERT_GE(rows.size(), static_cast<size_t>(3 + 7 * round));
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].step, static_cast<int64_t>(i + 1));
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(store::get_run(*db, id, /*stale_after_s=*/0.2).status, store::RunStatus::Lost);
    EXPECT_EQ(store::get_run(*db, id).status, store::RunStatus::Running) << "fresh heartbeat";
  }
}

}  // namespace
}  // namespace kiln::test
