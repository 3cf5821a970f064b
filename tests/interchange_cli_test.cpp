// End-to-end: kiln export writes a Hugging Face folder (config, unpadded weights, the BPE
// tokenizer's files); kiln import turns it back into a checkpoint that generates exactly
// as the original, exports to the same bytes, and fine-tunes with kiln train --resume under
// its own run name; a folder that is not a model is refused in one line. A LoRA fine-tune
// starts from an import, exports its adapters as a PEFT folder, and that folder imported onto
// the base is the same model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "trainer/checkpoint/safetensors.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

TEST(InterchangeCli, ExportImportGenerateAndFineTune) {
  const std::string dir = fresh_dir("interchange_cli");
  prepare_corpus(dir);
  ASSERT_EQ(run_command(kiln + " tokenizer train --input " + dir +
                        "/corpus.txt --vocab-size 300 --output " + dir + "/tok")
                .exit_code,
            0);
  ASSERT_EQ(run_command(kiln + " data prepare --input " + dir + "/corpus.txt --tokenizer " + dir +
                        "/tok --document-boundary blank-line --append-eod --output " + dir + "/bpe")
                .exit_code,
            0);
  const CommandResult trained = run_command(
      kiln + " train --no-store --name base" + small_run(dir + "/bpe") +
      " --set model.vocab_size=300 --set data.tokenizer=" + dir + "/tok" +
      " --set train.checkpoint_interval=6 --set train.checkpoint_dir=" + dir + "/checkpoints");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string checkpoint = dir + "/checkpoints/base";

  // Export: the folder transformers reads.
  const CommandResult exported = run_command(kiln + " export --checkpoint " + checkpoint +
                                             " --format hf --output " + dir + "/hf");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(exported.output, "kiln: exported " + checkpoint +
                                 "/step-00000006 (gpt2, 0.02M parameters, fp32) to " + dir +
                                 "/hf: config.json, model.safetensors, vocab.json, merges.txt, "
                                 "tokenizer_config.json\n");
  nlohmann::json config;
  std::ifstream(dir + "/hf/config.json") >> config;
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["vocab_size"], 300);
  EXPECT_EQ(config["n_positions"], 16);
  EXPECT_EQ(config["n_embd"], 32);
  EXPECT_EQ(config["n_layer"], 1);
  EXPECT_EQ(config["n_head"], 2);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["torch_dtype"], "float32");
  const SafetensorsFile weights(dir + "/hf/model.safetensors");
  EXPECT_EQ(weights.metadata().at("format"), "pt");
  EXPECT_EQ(weights.info("transformer.wte.weight").shape, (Shape{300, 32}))
      << "padding rows removed";
  EXPECT_EQ(weights.info("transformer.h.0.mlp.c_fc.weight").shape, (Shape{32, 128}))
      << "Conv1D [in, out]";
  EXPECT_FALSE(weights.contains("lm_head.weight")) << "tied to the embedding";
  EXPECT_EQ(read_text(dir + "/hf/vocab.json"), read_text(dir + "/tok/vocab.json"));
  EXPECT_EQ(read_text(dir + "/hf/merges.txt"), read_text(dir + "/tok/merges.txt"));

  // Import: a checkpoint of the same model.
  const CommandResult imported =
      run_command(kiln + " import --format hf --input " + dir + "/hf --output " + dir + "/tuned");
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find("as " + dir + "/tuned/step-00000000, run tuned, data.tokenizer=" +
                                 dir + "/tuned/tokenizer\n"),
            std::string::npos)
      << imported.output;
  const std::string greedy = " --prompt 'Document 7' --max-tokens 16 --temperature 0";
  const CommandResult a =
      run_command("(" + kiln + " generate --checkpoint " + checkpoint + greedy + " 2>/dev/null)");
  const CommandResult b = run_command("(" + kiln + " generate --checkpoint " + dir + "/tuned" +
                                      greedy + " 2>/dev/null)");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(b.output, a.output);
  ASSERT_EQ(run_command(kiln + " export --checkpoint " + dir + "/tuned --format hf --output " +
                        dir + "/hf2")
                .exit_code,
            0);
  EXPECT_EQ(read_text(dir + "/hf2/model.safetensors"), read_text(dir + "/hf/model.safetensors"));

  // Sharded: files of at most 20 kB (the embedding alone is larger) and transformers' index,
  // which import reads back to the same model.
  const CommandResult sharded = run_command(kiln + " export --checkpoint " + checkpoint +
                                            " --max-shard-size 20KB --output " + dir + "/hf_sharded");
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  EXPECT_NE(sharded.output.find(" to " + dir + "/hf_sharded: config.json, model-00001-of-0000"), std::string::npos)
      << sharded.output;
  EXPECT_NE(sharded.output.find(".safetensors, model.safetensors.index.json, vocab.json"), std::string::npos)
      << sharded.output;
  EXPECT_FALSE(fs::exists(dir + "/hf_sharded/model.safetensors"));
  ASSERT_EQ(run_command(kiln + " import --input " + dir + "/hf_sharded --output " + dir + "/from_shards").exit_code, 0);
  const CommandResult c = run_command("(" + kiln + " generate --checkpoint " + dir + "/from_shards" + greedy +
                                      " 2>/dev/null)");
  EXPECT_EQ(c.output, a.output);

  // Fine-tune: the imported checkpoint resumes at step 0 with the user's data.
  const CommandResult tuned = run_command(
      kiln + " train --resume " + dir + "/tuned --store " + dir + "/runs.db" +
      " --set 'data.paths=[\"" + dir +
      "/bpe\"]' --set train.steps=4 --set train.micro_batch=2"
      " --set train.global_batch=4 --set train.log_interval=2 --set train.checkpoint_interval=4"
      " --set train.checkpoint_dir=" +
      dir + "/checkpoints");
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find("kiln: recording run 1 'tuned'"), std::string::npos) << tuned.output;
  EXPECT_NE(tuned.output.find("kiln: resumed from " + dir + "/tuned/step-00000000 at step 0"),
            std::string::npos)
      << tuned.output;
  EXPECT_NE(tuned.output.find("step 4/4 | loss"), std::string::npos) << tuned.output;
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/tuned/step-00000004/manifest.json")) << tuned.output;
}

TEST(InterchangeCli, LoraFineTuneExportsAndImportsItsAdapters) {
  const std::string dir = fresh_dir("interchange_cli_lora");
  const std::string prefix = prepare_corpus(dir);
  // A Llama base, trained a little and exported, then imported as fine-tunes start.
  const std::string llama = " --set model.arch=llama --set model.n_kv_head=1 --set model.d_ff=48";
  const std::string run = " train --no-store" + small_run(prefix) + llama;
  ASSERT_EQ(run_command(kiln + run + " --name base").exit_code, 0);
  ASSERT_EQ(run_command(kiln + " export --checkpoint " + dir + "/checkpoints/base --output " + dir + "/hf").exit_code, 0);
  ASSERT_EQ(run_command(kiln + " import --input " + dir + "/hf --output " + dir + "/imported").exit_code, 0);
  const std::string lora = " --set finetune.lora.rank=4 --set finetune.lora.alpha=8 --set finetune.lora.targets=q,v,down"
                           " --set train.steps=12 --set train.lr=3e-3 --set train.checkpoint_interval=6"
                           " --set train.log_interval=1 --set train.eval_interval=0 --set train.sample_tokens=0"
                           " --set data.split=95,5,0";  // the import's, so both evaluate the same documents
  const CommandResult tuned = run_command(kiln + run + lora + " --name tuned --resume " + dir + "/imported");
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find("kiln: LoRA rank 4 (alpha 8, scale 2) beside q,v,down"), std::string::npos) << tuned.output;

  // Its adapters at step 6 as a PEFT folder, read back onto the base: steps 7 to 12 again.
  const CommandResult peft = run_command(kiln + " export --adapter --checkpoint " + dir +
                                         "/checkpoints/tuned/step-00000006 --output " + dir + "/peft");
  ASSERT_EQ(peft.exit_code, 0) << peft.output;
  EXPECT_NE(peft.output.find("adapter_config.json, adapter_model.safetensors"), std::string::npos) << peft.output;
  ASSERT_EQ(run_command(kiln + " import --input " + dir + "/hf --adapter " + dir + "/peft --output " + dir + "/again")
                .exit_code,
            0);
  // The same model (base and adapters exact in F32), so the same loss on the same data, but
  // for the order of fp32 sums: the import computes on every core, the run on one thread.
  const std::string eval = " eval --data " + prefix + " --iters 4 --micro-batch 2 --device cpu --checkpoint ";
  const CommandResult want = run_command(kiln + eval + dir + "/checkpoints/tuned/step-00000006");
  const CommandResult got = run_command(kiln + eval + dir + "/again");
  ASSERT_EQ(want.exit_code, 0) << want.output;
  ASSERT_EQ(got.exit_code, 0) << got.output;
  const double want_loss = nlohmann::json::parse(want.output)["loss"];
  EXPECT_NEAR(nlohmann::json::parse(got.output)["loss"].get<double>(), want_loss, 1e-6 * want_loss);
  // And not the base's: the adapters change it.
  const CommandResult base = run_command(kiln + eval + dir + "/imported");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  EXPECT_GT(std::abs(nlohmann::json::parse(base.output)["loss"].get<double>() - want_loss), 1e-3 * want_loss);

  // Resuming the tuned run under other LoRA settings is refused; without --adapter, an export
  // merges the adapters into plain weights.
  const CommandResult other = run_command(kiln + run + lora + " --set finetune.lora.rank=8 --resume " + dir +
                                          "/checkpoints/tuned/step-00000006");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("holds LoRA adapters trained with finetune.lora"), std::string::npos) << other.output;
  const CommandResult merged = run_command(kiln + " export --checkpoint " + dir + "/checkpoints/tuned --output " + dir + "/merged");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  // q_proj moved by its adapter; k_proj, which has none, is the base's byte for byte.
  const SafetensorsFile base_weights(dir + "/hf/model.safetensors"), merged_weights(dir + "/merged/model.safetensors");
  const auto bytes = [](const SafetensorsFile& f, const std::string& name) {
    const auto span = f.data(name);
    return std::vector<std::byte>(span.begin(), span.end());
  };
  EXPECT_NE(bytes(merged_weights, "model.layers.0.self_attn.q_proj.weight"),
            bytes(base_weights, "model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(bytes(merged_weights, "model.layers.0.self_attn.k_proj.weight"),
            bytes(base_weights, "model.layers.0.self_attn.k_proj.weight"));
  EXPECT_EQ(merged_weights.tensors().size(), base_weights.tensors().size());
}

TEST(InterchangeCli, AFolderThatIsNotAModelIsRefusedInOneLine) {
  const std::string dir = fresh_dir("interchange_refused");
  CommandResult r =
      run_command(kiln + " import --format hf --input " + dir + " --output " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "kiln: error: import: " + dir +
                          " has no config.json (a Hugging Face model folder has one)\n");
  std::ofstream(dir + "/config.json")
      << R"({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 2.0}})";
  r = run_command(kiln + " import --format hf --input " + dir + " --output " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "kiln: error: import: " + dir +
                          "/config.json: rope_scaling's rope_type \"linear\" is not one kiln computes (llama3)\n");
  std::ofstream(dir + "/config.json") << R"({"model_type": "llama", "hidden_size": 32,
      "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 300})";
  r = run_command(kiln + " import --format hf --input " + dir + " --output " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "kiln: error: import: " + dir +
                          " has neither model.safetensors nor model.safetensors.index.json\n");
  r = run_command(kiln + " export --checkpoint " + dir + " --max-shard-size 5GiB --output " + dir + "/x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "kiln: error: export: --max-shard-size \"5GiB\" is not a size: a number above 0 and KB, MB, GB or TB "
            "(powers of 1000, as transformers' max_shard_size), e.g. 5GB\n");
  r = run_command(kiln + " export --checkpoint " + dir + " --format onnx --output " + dir + "/x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--format"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::test
