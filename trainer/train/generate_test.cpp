// Generation with the decoder against generation by repeated full forwards, on the CPU in
// fp32, for both architectures: greedy tokens are the argmax of a full forward over the
// tokens the decoder holds, through slides of the context (the last half window kept) and
// a prompt longer than the context; the stop id ends generation without being returned.
#include "trainer/train/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/byte_level_tokenizer.h"
#include "tests/small_model.h"
#include "tests/test_files.h"
#include "trainer/data/tokenizer.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

ModelConfig small_model(const std::string& arch) {
  ModelConfig m = test::small_model(arch, 32, 40, 12);
  m.make_vocab_size_divisible_by = 8;
  m.init_std = 0.3;  // large weights: greedy tokens vary instead of repeating one id
  return m;
}

// Greedy tokens from full forwards, with the context policy generate.h describes: the
// window holds the prompt's last seq_len tokens, grows by each new token and, when it is
// full, drops to its last seq_len / 2 tokens with the new one.
std::vector<int32_t> greedy_by_full_forwards(GptModel& model, std::vector<int32_t> window, int n) {
  const size_t W = static_cast<size_t>(model.config().seq_len);
  if (window.size() > W) window.erase(window.begin(), window.end() - static_cast<long>(W));
  std::vector<int32_t> out;
  std::vector<float> logits;
  for (int i = 0; i < n; ++i) {
    const auto t = static_cast<int64_t>(window.size());
    model.set_batch(window.data(), nullptr, 1, t);
    model.forward();
    model.logits_row(t - 1, logits);
    const auto next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    if (window.size() == W)
      window.erase(window.begin(), window.end() - static_cast<long>(W / 2 - 1));
    window.push_back(next);
  }
  return out;
}

class Generate : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { model_.init_parameters(5); }
  std::unique_ptr<Ops> ops_ = make_cpu_ops(2);
  GptModel model_{small_model(GetParam()), 1, *ops_, DType::F32};
};

TEST_P(Generate, GreedyEqualsTheArgmaxOfRepeatedFullForwards) {
  GptDecoder decoder(model_);
  GenerateOptions options;
  options.sampling.temperature = 0;
  options.max_tokens = 40;  // slides three times in a context of 12
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  std::vector<int32_t> streamed;
  const std::vector<int32_t> got =
      generate_ids(decoder, prompt, options, [&](int32_t id) { streamed.push_back(id); });
  const std::vector<int32_t> want = greedy_by_full_forwards(model_, prompt, 40);
  EXPECT_EQ(got, want);
  EXPECT_EQ(streamed, got);
  EXPECT_GT(std::count_if(got.begin(), got.end(), [&](int32_t id) { return id != got[0]; }), 0)
      << "the greedy tokens never change: the test would not see a wrong position";

  // A prompt longer than the context keeps its last seq_len tokens.
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 30; ++i) long_prompt.push_back((i * 7) % 40);
  options.max_tokens = 8;
  EXPECT_EQ(generate_ids(decoder, long_prompt, options),
            greedy_by_full_forwards(model_, long_prompt, 8));
}

TEST_P(Generate, TheStopIdEndsGenerationUnreturned) {
  GptDecoder decoder(model_);
  GenerateOptions options;
  options.sampling.temperature = 0;
  options.max_tokens = 10;
  const std::vector<int32_t> prompt = {2, 7};
  const std::vector<int32_t> all = generate_ids(decoder, prompt, options);
  ASSERT_EQ(all.size(), 10u);
  // Stop at the first token that differs from the ones before it, so it was not drawn earlier.
  size_t stop_at = 1;
  while (stop_at < all.size() &&
         std::count(all.begin(), all.begin() + static_cast<long>(stop_at), all[stop_at]) > 0)
    ++stop_at;
  ASSERT_LT(stop_at, all.size());
  options.stop_id = all[stop_at];
  EXPECT_EQ(generate_ids(decoder, prompt, options),
            std::vector<int32_t>(all.begin(), all.begin() + static_cast<long>(stop_at)));
}

TEST_P(Generate, SamplingIsRepeatableForASeed) {
  GptDecoder decoder(model_);
  GenerateOptions options;
  options.sampling = {0.9, 10, 0.95};
  options.max_tokens = 30;
  options.seed = 11;
  const std::vector<int32_t> prompt = {1};
  const auto a = generate_ids(decoder, prompt, options);
  EXPECT_EQ(generate_ids(decoder, prompt, options), a);
  options.seed = 12;
  EXPECT_NE(generate_ids(decoder, prompt, options), a);
}

// A tokenizer that adds its begin-of-document token (add_bos_token) starts a prompt with it, as
// Hugging Face's tokenizer(prompt) does; an empty prompt starts from it.
TEST(PromptIds, StartWithTheBeginOfDocumentTheTokenizerAdds) {
  const std::string dir = test::fresh_dir("prompt_bos");
  test::write_byte_level_tokenizer(dir, {"<|endoftext|>", "<s>"},
                                   {{"bos_token", "<s>"}, {"eos_token", "<|endoftext|>"}, {"add_bos_token", true}});
  const std::unique_ptr<Tokenizer> adds = load_tokenizer(dir);
  EXPECT_EQ(prompt_ids(*adds, "ab"), (std::vector<int32_t>{257, 'a', 'b'}));
  EXPECT_EQ(prompt_ids(*adds, ""), (std::vector<int32_t>{257}));
  test::write_byte_level_tokenizer(dir, {"<|endoftext|>", "<s>"}, {{"bos_token", "<s>"}, {"add_bos_token", false}});
  const std::unique_ptr<Tokenizer> named = load_tokenizer(dir);
  EXPECT_EQ(prompt_ids(*named, "ab"), (std::vector<int32_t>{'a', 'b'}));
  EXPECT_EQ(prompt_ids(*named, ""), (std::vector<int32_t>{257}));
  EXPECT_EQ(prompt_ids(*load_tokenizer("byte"), ""), (std::vector<int32_t>{256}));  // no bos: the end of document
}

INSTANTIATE_TEST_SUITE_P(Arch, Generate, testing::Values("gpt2", "llama"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace kiln
