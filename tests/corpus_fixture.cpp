#include "tests/corpus_fixture.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/run_command.h"

namespace kiln::test {

namespace {

// `documents` blank-line separated, `line(d)` each, in dir/corpus.txt, prepared byte-level with
// an end-of-document token into dir/corpus. The prefix.
template <typename Line>
std::string prepare_documents(const std::string& dir, int documents, Line line) {
  const std::string text = dir + "/corpus.txt";
  std::ofstream out(text);
  for (int d = 0; d < documents; ++d) out << line(d) << "\n\n";
  out.close();
  const CommandResult r = run_command(kiln_binary() + " data prepare --input " + text +
                                      " --tokenizer byte --document-boundary blank-line"
                                      " --append-eod --output " + dir + "/corpus");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir + "/corpus";
}

}  // namespace

std::string prepare_corpus(const std::string& dir) {
  return prepare_documents(dir, 200, [](int d) {
    return "Document " + std::to_string(d) + ": the quick brown fox jumps over the lazy dog.";
  });
}

std::string prepare_verses(const std::string& dir) {
  return prepare_documents(dir, 3000, [](int d) {
    return "Verse " + std::to_string(d) + ": and the earth brought forth grass, and herb yielding seed.";
  });
}

std::string small_run(const std::string& prefix) {
  return " --set 'data.paths=[\"" + prefix + "\"]' --set data.tokenizer=byte"
         " --set model.vocab_size=257 --set model.n_layer=1"
         " --set model.d_model=32 --set model.n_head=2 --set model.seq_len=16"
         " --set train.global_batch=4 --set train.micro_batch=2 --set train.steps=6"
         " --set train.warmup=2 --set train.log_interval=2 --set train.eval_interval=3"
         " --set train.eval_iters=2 --set data.split=90,10,0 --set train.sample_tokens=20"
         " --set train.sample_prompt=Doc --set train.checkpoint_interval=0 --set backend.threads=1"
         // Every run keeps a final checkpoint: in the test's own folder, beside its corpus.
         " --set train.checkpoint_dir=" + std::filesystem::path(prefix).parent_path().string() + "/checkpoints";
}

namespace {
// Every number `pattern`'s first group matches in the output, in order.
std::vector<double> printed_numbers(const std::string& output, const std::regex& pattern) {
  std::vector<double> out;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), pattern); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}
}  // namespace

std::vector<double> printed_losses(const std::string& output) {
  static const std::regex loss("loss ([0-9.]+)");
  return printed_numbers(output, loss);
}

std::vector<double> printed_grad_norms(const std::string& output) {
  static const std::regex norm("grad norm ([0-9.]+)");
  return printed_numbers(output, norm);
}

std::vector<double> step_losses(const std::string& output) {
  static const std::regex line(R"(^step +\d+/\d+ \| loss ([0-9.]+))");
  std::vector<double> out;
  std::istringstream lines(output);
  std::smatch match;
  for (std::string text; std::getline(lines, text);)
    if (std::regex_search(text, match, line)) out.push_back(std::stod(match[1]));
  return out;
}

}  // namespace kiln::test
