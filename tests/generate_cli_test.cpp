// End-to-end: kiln generate and kiln eval on checkpoints that kiln train wrote, one GPT-2
// on the byte tokenizer and one Llama-style on a BPE tokenizer trained on the corpus:
// generation reproduces the trainer's end-of-run sample and is repeatable, greedy output
// is deterministic, eval prints its JSON and agrees with the trainer's validation, and bad
// input is one line and a non-zero exit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

class GenerateCli : public testing::Test {
 protected:
  // Two small runs, trained once for every test here.
  static void SetUpTestSuite() {
    dir_ = fresh_dir("generate_cli");
    const std::string prefix = prepare_corpus(dir_);
    const std::string common =
        " --no-store --set train.checkpoint_interval=6 --set train.checkpoint_dir=" + dir_ +
        "/checkpoints";
    byte_run_ = run_command(kiln + " train --name byte" + small_run(prefix) + common);
    EXPECT_EQ(byte_run_.exit_code, 0) << byte_run_.output;

    const CommandResult tok = run_command(kiln + " tokenizer train --input " + dir_ +
                                          "/corpus.txt --vocab-size 300 --output " + dir_ + "/tok");
    EXPECT_EQ(tok.exit_code, 0) << tok.output;
    const CommandResult prep =
        run_command(kiln + " data prepare --input " + dir_ + "/corpus.txt --tokenizer " + dir_ +
                    "/tok --document-boundary blank-line --append-eod --output " + dir_ + "/bpe");
    EXPECT_EQ(prep.exit_code, 0) << prep.output;
    bpe_run_ = run_command(kiln + " train --name bpe" + small_run(dir_ + "/bpe") + common +
                           " --set model.arch=llama --set model.n_kv_head=1"
                           " --set model.tie_embeddings=false --set model.vocab_size=300"
                           " --set data.tokenizer=" +
                           dir_ + "/tok");
    EXPECT_EQ(bpe_run_.exit_code, 0) << bpe_run_.output;
  }

  // A failed set-up fails every test rather than leaving them to be reported as skipped.
  void SetUp() override {
    ASSERT_EQ(byte_run_.exit_code, 0) << byte_run_.output;
    ASSERT_EQ(bpe_run_.exit_code, 0) << bpe_run_.output;
  }

  // The text between the trainer's sample markers.
  static std::string sample_of(const std::string& output) {
    const std::string open = "--- sample (temperature 0.8) ---\n", close = "\n---\n";
    const size_t begin = output.find(open);
    if (begin == std::string::npos) return "(no sample)";
    const size_t end = output.rfind(close);
    return output.substr(begin + open.size(), end - begin - open.size());
  }

  // stdout alone; stderr alone.
  static CommandResult quiet(const std::string& args) {
    return run_command("(" + kiln + args + " 2>/dev/null)");
  }
  static CommandResult errors(const std::string& args) {
    return run_command("(" + kiln + args + " 2>&1 >/dev/null)");
  }

  static std::string byte_checkpoint() { return dir_ + "/checkpoints/byte"; }
  static std::string bpe_checkpoint() { return dir_ + "/checkpoints/bpe"; }

  static inline std::string dir_;
  static inline CommandResult byte_run_, bpe_run_;
};

TEST_F(GenerateCli, ReproducesTheTrainersSampleWithTheRunsSeed) {
  // The trainer samples 20 tokens after "Doc" at temperature 0.8 with train.seed.
  for (const auto& [run, checkpoint] :
       {std::pair{byte_run_, byte_checkpoint()}, std::pair{bpe_run_, bpe_checkpoint()}}) {
    const CommandResult r = quiet(" generate --checkpoint " + checkpoint +
                                  " --prompt Doc --max-tokens 20 --temperature 0.8");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, sample_of(run.output) + "\n") << checkpoint;
  }
}

TEST_F(GenerateCli, GreedyOutputIsDeterministic) {
  const std::string args = " generate --checkpoint " + bpe_checkpoint() +
                           " --prompt 'Document 12: the' --max-tokens 24 --temperature 0";
  const CommandResult a = quiet(args), b = quiet(args + " --seed 99");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output.rfind("Document 12: the", 0), 0u) << a.output;
  EXPECT_GT(a.output.size(), std::string("Document 12: the\n").size()) << a.output;
  EXPECT_EQ(b.output, a.output) << "greedy draws nothing: the seed cannot matter";
  // Sampling from the single most likely token is greedy too.
  EXPECT_EQ(quiet(" generate --checkpoint " + bpe_checkpoint() +
                  " --prompt 'Document 12: the' --max-tokens 24 --temperature 1.5 --top-k 1")
                .output,
            a.output);
  // The statistics go to stderr, after the text.
  const CommandResult both = run_command(kiln + args);
  EXPECT_NE(both.output.find("kiln: "), std::string::npos) << both.output;
  EXPECT_NE(both.output.find(" tokens in "), std::string::npos) << both.output;
}

TEST_F(GenerateCli, StopsAtMaxTokensOrTheEndOfDocument) {
  // The byte tokenizer: every generated token but the end of document is one byte, and an
  // empty prompt echoes nothing, so stdout is the generated bytes and a newline.
  for (int seed = 1; seed <= 4; ++seed) {
    const std::string args = " generate --checkpoint " + byte_checkpoint() +
                             " --prompt '' --max-tokens 5 --seed " + std::to_string(seed);
    const CommandResult text = quiet(args), stats = errors(args);
    ASSERT_EQ(text.exit_code, 0) << stats.output;
    const size_t n = text.output.size() - 1;
    EXPECT_LE(n, 5u);
    EXPECT_EQ(stats.output.rfind("kiln: " + std::to_string(n) + " tokens in ", 0), 0u)
        << stats.output;
    EXPECT_EQ(stats.output.find("ended at the end of document") != std::string::npos, n < 5)
        << stats.output;
  }
  EXPECT_EQ(
      quiet(" generate --checkpoint " + byte_checkpoint() + " --prompt abc --max-tokens 0").output,
      "abc\n");
}

TEST_F(GenerateCli, ABytePromptNeedNotBeUtf8ButABpePromptMust) {
  const CommandResult bytes = quiet(" generate --checkpoint " + byte_checkpoint() +
                                    " --prompt \"$(printf 'ab\\351')\" --max-tokens 3");
  ASSERT_EQ(bytes.exit_code, 0) << bytes.output;
  EXPECT_EQ(bytes.output.rfind("ab\xe9", 0), 0u);
  const CommandResult bpe = run_command(kiln + " generate --checkpoint " + bpe_checkpoint() +
                                        " --prompt \"$(printf 'caf\\351')\" --max-tokens 3");
  EXPECT_EQ(bpe.exit_code, 1);
  EXPECT_EQ(bpe.output,
            "kiln: error: --prompt is not valid UTF-8 (byte 0xe9 at offset 3), and "
            "tokenizer " +
                dir_ + "/tok reads UTF-8 text only\n");
}

TEST_F(GenerateCli, BadInputIsOneLineAndNonZero) {
  const std::string missing = dir_ + "/checkpoints/nothing";
  CommandResult r = run_command(kiln + " generate --checkpoint " + missing + " --prompt x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "kiln: error: --checkpoint " + missing + ": no such folder\n");

  r = run_command(kiln + " eval --checkpoint " + dir_ + " --data " + dir_ + "/corpus");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "kiln: error: --checkpoint " + dir_ +
                          " is not a checkpoint (no manifest.json) nor a folder of checkpoints "
                          "(no latest file)\n");

  // The BPE tokenizer's ids do not fit the byte model's 257 rows.
  r = run_command(kiln + " generate --checkpoint " + byte_checkpoint() +
                  " --prompt x --tokenizer " + dir_ + "/tok");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output.rfind("kiln: error: tokenizer " + dir_ + "/tok has ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("ids, more than the 257 of the model in " + byte_checkpoint() +
                          "/step-00000006 (model.vocab_size)\n"),
            std::string::npos)
      << r.output;

  r = run_command(kiln + " generate --checkpoint " + byte_checkpoint() + " --prompt x --top-p 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "kiln: error: --top-p must be in (0, 1], got 0\n");
  r = run_command(kiln + " generate --checkpoint " + byte_checkpoint() +
                  " --prompt x --temperature -1");
  EXPECT_EQ(r.output, "kiln: error: --temperature must be 0 (greedy) or more, got -1\n");
}

TEST_F(GenerateCli, EvalPrintsJsonThatAgreesWithTheTrainersValidation) {
  // The trainer's last validation: train.eval_iters=2 micro-batches of 2 from the valid split.
  for (const auto& [run, checkpoint] :
       {std::pair{byte_run_, byte_checkpoint()}, std::pair{bpe_run_, bpe_checkpoint()}}) {
    const CommandResult r =
        quiet(" eval --checkpoint " + checkpoint + " --data " +
              (checkpoint == byte_checkpoint() ? dir_ + "/corpus" : dir_ + "/bpe") +
              " --iters 2 --split valid");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json j = nlohmann::json::parse(r.output);
    for (const char* key : {"loss", "perplexity", "tokens", "bits_per_byte", "bytes"})
      EXPECT_TRUE(j.contains(key)) << key << " in " << r.output;
    EXPECT_EQ(j["tokens"].get<int64_t>(), 2 * 2 * 16);
    EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(j["loss"].get<double>()), 1e-9);
    const size_t at = run.output.rfind("valid loss ");
    ASSERT_NE(at, std::string::npos) << run.output;
    EXPECT_NEAR(j["loss"].get<double>(), std::stod(run.output.substr(at + 11, 6)), 1e-4)
        << checkpoint;
    // bits per byte = loss in bits over the bytes the targets spell.
    EXPECT_NEAR(j["bits_per_byte"].get<double>(),
                j["loss"].get<double>() * j["tokens"].get<double>() / std::log(2.0) /
                    j["bytes"].get<double>(),
                1e-9);
    if (checkpoint == bpe_checkpoint()) {
      EXPECT_GT(j["bytes"].get<int64_t>(), j["tokens"].get<int64_t>()) << "BPE tokens span bytes";
    }
  }
  // The whole split by default; and a split the run's data.split leaves empty.
  const CommandResult all = quiet(" eval --checkpoint " + byte_checkpoint() + " --data " + dir_ +
                                  "/corpus --micro-batch 3");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_GT(nlohmann::json::parse(all.output)["tokens"].get<int64_t>(), 2 * 2 * 16);
  const CommandResult test = run_command(kiln + " eval --checkpoint " + byte_checkpoint() +
                                         " --data " + dir_ + "/corpus --split test");
  EXPECT_EQ(test.exit_code, 1);
  EXPECT_EQ(test.output,
            "kiln: error: data: the test split has weight 0 in split \"90,10,0\", "
            "so it holds no documents\n");
}

}  // namespace
}  // namespace kiln::test
