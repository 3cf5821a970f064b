// CUDA graphs (docs/gpu.md#cuda-graphs): a run whose step is captured once and replayed
// trains the same bits as the same run op by op. Two kiln train runs of each tiny model on the
// GPU, train.cuda_graphs=true and false, recorded in stores: every step's loss and gradient
// norm are equal as doubles, and so are the checkpoints' weights and optimizer state after the
// last step. The replayed run must say so at start-up and never fall back. An MoE model's
// per-expert loads, counted on the device, must match too.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "store/expert_queries.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "store/types.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

// Two warm-up steps op by op, then ten replays (and, in fp16, a capture again after each
// change of the loss scale). Two micro-batches a step, so the replay accumulates.
constexpr int kSteps = 12;

std::string settings(const std::string& prefix, const std::string& dir) {
  return " --set 'data.paths=[\"" + prefix + "\"]' --set data.tokenizer=byte --set model.vocab_size=257"
         " --set model.n_layer=2 --set model.d_model=128 --set model.n_head=2 --set model.seq_len=64"
         " --set train.global_batch=8 --set train.micro_batch=4 --set train.steps=" + std::to_string(kSteps) +
         " --set train.warmup=2 --set train.log_interval=1 --set train.eval_interval=0"
         " --set train.sample_tokens=0 --set data.split=90,10,0 --set backend.device=cuda"
         " --set backend.attention=kiln --set train.checkpoint_interval=" + std::to_string(kSteps) +
         " --set train.checkpoint_dir=" + dir + "/checkpoints";
}

struct Run {
  std::vector<store::MetricRow> rows;
  std::vector<store::ExpertLoad> loads;  // MoE layers only
  std::string checkpoint;  // the last step's folder
};

Run train(const std::string& dir, const std::string& prefix, const std::string& name, const std::string& model,
          bool graphs) {
  const std::string path = dir + "/" + name + ".db";
  const CommandResult r = run_command(std::string(KILN_BINARY) + " train --store " + path + " --name " + name +
                                      settings(prefix, dir) + model +
                                      " --set train.cuda_graphs=" + (graphs ? "true" : "false"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string banner = graphs ? "kiln: CUDA graphs (train.cuda_graphs=true): the whole step is captured"
                                    : "kiln: CUDA graphs: not used (train.cuda_graphs=false)";
  EXPECT_NE(r.output.find(banner), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("CUDA graphs: off from step"), std::string::npos) << r.output;
  Run run;
  auto db = store::open_store(path, store::Access::ReadOnly);
  store::for_each_metric(*db, store::resolve_run(*db, name),
                         [&](const store::MetricRow& row) { run.rows.push_back(row); });
  store::for_each_expert_load(*db, store::resolve_run(*db, name),
                              [&](const store::ExpertLoad& load) { run.loads.push_back(load); });
  run.checkpoint = dir + "/checkpoints/" + name + fmt::format("/step-{:08d}", kSteps);
  return run;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void expect_same_training(const std::string& label, const std::string& model) {
  const std::string dir = fresh_dir("cuda_graphs_" + label);
  const std::string prefix = prepare_corpus(dir);
  const Run eager = train(dir, prefix, label + "-eager", model, false);
  const Run replayed = train(dir, prefix, label + "-graphs", model, true);
  ASSERT_EQ(eager.rows.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(replayed.rows.size(), static_cast<size_t>(kSteps));
  for (size_t i = 0; i < eager.rows.size(); ++i) {
    EXPECT_EQ(replayed.rows[i].loss, eager.rows[i].loss) << label << " step " << i + 1;
    EXPECT_EQ(replayed.rows[i].grad_norm, eager.rows[i].grad_norm) << label << " step " << i + 1;
    EXPECT_EQ(replayed.rows[i].skipped_steps, eager.rows[i].skipped_steps) << label << " step " << i + 1;
  }
  ASSERT_EQ(replayed.loads.size(), eager.loads.size()) << label;
  for (size_t i = 0; i < eager.loads.size(); ++i) {
    EXPECT_EQ(replayed.loads[i].tokens, eager.loads[i].tokens) << label << " load row " << i;
    EXPECT_EQ(replayed.loads[i].dropped, eager.loads[i].dropped) << label << " load row " << i;
    EXPECT_EQ(replayed.loads[i].aux_loss, eager.loads[i].aux_loss) << label << " load row " << i;
  }
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(file_bytes(replayed.checkpoint + "/" + file) == file_bytes(eager.checkpoint + "/" + file))
        << label << ": " << file << " differs after " << kSteps << " steps";
}

TEST(CudaGraphs, Gpt2TinyTrainsTheSameBitsReplayed) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  expect_same_training("gpt2-tiny", " --set precision.dtype=bf16");
}

TEST(CudaGraphs, LlamaTinyTrainsTheSameBitsReplayed) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  expect_same_training("llama-tiny",
                       " --set precision.dtype=bf16 --set model.arch=llama --set model.n_kv_head=1 --set model.d_ff=256");
}

// Routed on the device into rows of fixed sizes (the capacity's, padded), with aux-loss-free
// balancing's bias moved between steps: the replays route, count the loads and read the bias
// as the eager steps do.
TEST(CudaGraphs, MoeLlamaTinyTrainsTheSameBitsReplayed) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  expect_same_training("moe-llama-tiny",
                       " --set precision.dtype=bf16 --set model.arch=llama --set model.n_kv_head=1 --set model.d_ff=256"
                       " --set moe.num_experts=4 --set moe.top_k=2 --set moe.ffn_hidden=128"
                       " --set moe.capacity_factor=1.25 --set moe.pad_to_capacity=true"
                       " --set moe.aux_loss_coeff=0.01 --set moe.bias_update_rate=0.001");
}

// fp8's scales live in device memory the replays read, rewritten by the host between steps
// (delayed scaling): a replayed step casts with each step's scales as the eager one does.
TEST(CudaGraphs, Fp8LlamaTinyTrainsTheSameBitsReplayed) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  expect_same_training("llama-tiny-fp8",
                       " --set precision.dtype=fp8 --set model.arch=llama --set model.n_kv_head=1 --set model.d_ff=256");
}

// fp16's loss scale bakes into the captured backward: a skipped step halves it and the next
// replay is a new capture, which must keep the bits too.
TEST(CudaGraphs, Fp16LossScalingTrainsTheSameBitsReplayed) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  expect_same_training("gpt2-tiny-fp16", " --set precision.dtype=fp16");
}

}  // namespace
}  // namespace kiln::test
