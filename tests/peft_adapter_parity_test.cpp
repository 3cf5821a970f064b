// A PEFT adapter folder that `kiln export --adapter` writes, loaded by PEFT's rules and not by
// kiln's importer: tests/parity/peft_check.py reads adapter_config.json and
// adapter_model.safetensors as PeftModel.from_pretrained does (the config's fields, each key
// mapped onto a module of the base export that target_modules names, the factors' shapes
// against its weight) and computes the base plus the adapters as PEFT's LoraLayer does in
// evaluation; its logits must be kiln's, with the adapters beside the base, within the
// 1e-5 relative that the other exports are held to (fp32 sums in another order:
// tests/hf_export_parity_test.cpp). A folder that breaks PEFT's rules must fail the check.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/peft_folder.h"
#include "tests/run_command.h"
#include "tests/small_model.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/interchange/hf_export.h"
#include "trainer/optim/adamw.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kCheck = "/usr/bin/python3 " + std::string(KILN_SOURCE_DIR) + "/tests/parity/peft_check.py";
constexpr int64_t kBatch = 2;
constexpr double kTolerance = 1e-5;  // relative, all logits as one tensor

// The Llama test model, with adapters of rank 4 beside every projection (and a dropout, which
// the folder records and evaluation leaves out) when lora.
ModelConfig peft_model(bool lora) {
  ModelConfig m = test::small_model("llama", 64, 300, 16);
  m.make_vocab_size_divisible_by = 64;
  m.init_std = 0.05;
  if (lora) {
    m.lora.rank = 4;
    m.lora.alpha = 12;
    m.lora.dropout = 0.1;
    m.lora.targets = "q,k,v,o,gate,up,down";
  }
  return m;
}

// The model drawn from one seed, its norms off their ones and its B factors off zero (the base
// is the same with adapters or without: each parameter draws from its own stream).
void perturb(GptModel& model) {
  Random jitter(3);
  for (const Parameter& p : model.parameters().all())
    if (p.value.shape.rank == 1)
      for (int64_t i = 0; i < p.value.numel(); ++i)
        p.value.as<float>()[i] = static_cast<float>(1.0 + 0.1 * jitter.normal());
  Random draw(5);
  for (const Parameter& p : model.parameters().all())
    if (p.name.ends_with(".lora_b"))
      for (int64_t i = 0; i < p.value.numel(); ++i) p.value.as<float>()[i] = static_cast<float>(0.05 * draw.normal());
}

std::string save(GptModel& model, Ops& ops, const fs::path& dir) {
  TrainConfig train;
  AdamW optimizer(train, model.parameters(), ops);
  Config config;
  config.model = model.config();
  TrainingState state;
  state.run_name = "peft";
  state.layout = "tp1.pp1.dp1";
  state.config = config_to_json(config);
  return save_checkpoint(dir.string(), state, model, optimizer.state_for_checkpoint(), ops, 0).path;
}

TEST(PeftAdapterParity, PeftsRulesLoadTheFolderOntoTheBaseAndGiveKilnsLogits) {
  const fs::path dir = fs::path(testing::TempDir()) / "kiln_peft_parity";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto ops = make_cpu_ops(2);
  GptModel base(peft_model(false), kBatch, *ops), tuned(peft_model(true), kBatch, *ops);
  for (GptModel* model : {&base, &tuned}) {
    model->init_parameters(424242);
    perturb(*model);
  }
  export_hf(save(base, *ops, dir / "base_run"), (dir / "base").string());
  export_hf(save(tuned, *ops, dir / "tuned_run"), (dir / "adapter").string(), true);

  const int64_t T = tuned.config().seq_len, N = kBatch * T;
  Random pick(17);
  std::vector<int32_t> tokens(static_cast<size_t>(N));
  for (auto& t : tokens) t = static_cast<int32_t>(pick.below(300));
  tuned.set_batch(tokens.data(), nullptr, kBatch, T);  // evaluation: nothing dropped
  tuned.forward();
  std::vector<float> logits, row;
  for (int64_t r = 0; r < N; ++r) {
    tuned.logits_row(r, row);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  std::ofstream(dir / "tokens.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 4));
  std::ofstream(dir / "manifest.json") << json{{"batch", kBatch}, {"seq_len", T}}.dump();

  const std::string folders = " " + (dir / "base").string() + " ";
  const test::CommandResult r = test::run_command(kCheck + folders + (dir / "adapter").string() + " " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("peft check: 14 adapted modules, r 4, scale 3"), std::string::npos) << r.output;
  std::vector<float> peft(logits.size());
  std::ifstream in(dir / "peft_logits.bin", std::ios::binary);
  in.read(reinterpret_cast<char*>(peft.data()), static_cast<std::streamsize>(peft.size() * sizeof(float)));
  ASSERT_EQ(static_cast<size_t>(in.gcount()), peft.size() * sizeof(float));
  double diff = 0, norm = 0, moved = 0;
  std::vector<float> plain;
  base.set_batch(tokens.data(), nullptr, kBatch, T);
  base.forward();
  for (int64_t i = 0; i < N; ++i) {
    base.logits_row(i, row);
    plain.insert(plain.end(), row.begin(), row.end());
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    diff += std::pow(static_cast<double>(logits[i]) - peft[i], 2);
    norm += std::pow(static_cast<double>(peft[i]), 2);
    moved += std::pow(static_cast<double>(logits[i]) - plain[i], 2);
  }
  EXPECT_LT(std::sqrt(diff / norm), kTolerance) << "logits";
  // The adapters matter: the base alone is far from them.
  EXPECT_GT(std::sqrt(moved / norm), 100 * kTolerance);
  std::printf("peft adapter parity: logits %.3e (the adapters move them %.3e)\n", std::sqrt(diff / norm),
              std::sqrt(moved / norm));

  // What PEFT would refuse or load otherwise, refused by the check.
  const auto check_with = [&](const std::string& key, const json& value) {
    const fs::path changed = test::peft_folder_with(dir / "adapter", key, value);
    return test::run_command(kCheck + folders + changed.string() + " " + dir.string());
  };
  const test::CommandResult narrower = check_with("target_modules", json{"q_proj", "v_proj"});
  EXPECT_NE(narrower.exit_code, 0);
  EXPECT_NE(narrower.output.find("which target_modules ['q_proj', 'v_proj'] do not name"), std::string::npos)
      << narrower.output;
  const test::CommandResult rank = check_with("r", 8);
  EXPECT_NE(rank.exit_code, 0);
  EXPECT_NE(rank.output.find("'s lora_A is (4, "), std::string::npos) << rank.output;
  const test::CommandResult rslora = check_with("use_rslora", true);
  EXPECT_NE(rslora.exit_code, 0);
  EXPECT_NE(rslora.output.find("use_rslora is True"), std::string::npos) << rslora.output;
}

}  // namespace
}  // namespace kiln
