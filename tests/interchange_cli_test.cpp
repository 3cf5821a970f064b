// End-to-end: kiln export writes a Hugging Face folder (config, unpadded weights, the BPE
// tokenizer's files); kiln import turns it back into a checkpoint that generates exactly
// as the original, exports to the same bytes, and fine-tunes with kiln train --resume under
// its own run name; a folder that is not a model is refused in one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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
  r = run_command(kiln + " export --checkpoint " + dir + " --format onnx --output " + dir + "/x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--format"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::test
