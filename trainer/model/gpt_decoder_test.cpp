// The decoder against the full forward, on the CPU in fp32, for both architectures: the
// logits at every position of a sequence (a prompt and the tokens after it) are the full
// forward's logits at that position, whether the sequence is fed a token at a time, as a
// prompt in one call, through chunks smaller than the prompt, or as two sequences in
// lockstep.
#include "trainer/model/gpt_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/error_of.h"
#include "tests/small_model.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

// A model whose norm weights and biases sit off their ones and zeros, so every path counts.
// "qwen2": a Llama layer with query, key and value biases; "qwen3": one with normalised query
// and key heads, 24 wide (not 64 / 4); "_lora": LoRA adapters beside
// some of the layers (a part of the fused qkv among them), their B factors off zero; "mla":
// DeepSeek's latent attention, its cache the latent (heads of 12 + 8 turned by RoPE, values of
// 10, latents of 24 and 16), "mla_direct_q" without the query's latent, "mla_yarn" with YaRN's
// RoPE and softmax scale.
ModelConfig decoder_model(const std::string& variant) {
  const std::string arch = variant.substr(0, variant.find('_'));
  ModelConfig m = test::small_model(arch.starts_with("qwen") || arch == "mla" ? "llama" : arch, 64, 50, 16);
  if (arch == "mla") test::use_latent_attention(m, variant == "mla_direct_q" ? 0 : 24, 16, 12, 8, 10);
  if (variant == "mla_yarn") {
    m.rope_scaling = "yarn";
    m.rope_scaling_factor = 4;
    m.rope_original_seq_len = 4;
    m.rope_mscale_all_dim = 0.7;
  }
  m.attention_bias = arch == "qwen2";
  m.qk_norm = arch == "qwen3";
  m.explicit_head_dim = m.qk_norm ? 24 : 0;
  if (variant.ends_with("_lora")) {
    m.lora.rank = 4;
    m.lora.alpha = 6;
    m.lora.targets = arch == "gpt2" ? "k,o,fc,down" : "q,v,up,down";
  }
  m.make_vocab_size_divisible_by = 16;
  m.init_std = 0.1;
  return m;
}

void jitter_norms(GptModel& model) {
  Random jitter(5);
  for (const Parameter& p : model.parameters().all()) {
    if (p.name.ends_with(".lora_b"))
      for (int64_t i = 0; i < p.value.numel(); ++i) p.value.as<float>()[i] = 0.1f * static_cast<float>(jitter.normal());
    if (p.value.shape.rank != 1) continue;
    const float base = p.name.ends_with(".weight") ? 1.0f : 0.0f;
    for (int64_t i = 0; i < p.value.numel(); ++i)
      p.value.as<float>()[i] = base + 0.1f * static_cast<float>(jitter.normal());
  }
}

// The full forward's logits at every position of each sequence: [b][t][vocab].
std::vector<std::vector<std::vector<float>>> full_logits(GptModel& model,
                                                         const std::vector<int32_t>& tokens,
                                                         int64_t b, int64_t t) {
  model.set_batch(tokens.data(), nullptr, b, t);
  model.forward();
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(b));
  for (int64_t s = 0; s < b; ++s)
    for (int64_t i = 0; i < t; ++i) {
      out[static_cast<size_t>(s)].emplace_back();
      model.logits_row(s * t + i, out[static_cast<size_t>(s)].back());
    }
  return out;
}

// max |a - b| / max |b|: the logits' error relative to their scale.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return a.size() == b.size() ? diff / scale : INFINITY;
}

constexpr double kTolerance = 1e-5;
constexpr int64_t kLength = 13;  // a prompt of 5 and 8 tokens after it, in a context of 16

class Decoder : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_.init_parameters(31);
    jitter_norms(model_);
    Random pick(77);
    for (auto& t : tokens_) t = static_cast<int32_t>(pick.below(50));
  }
  std::unique_ptr<Ops> ops_ = make_cpu_ops(2);
  GptModel model_{decoder_model(GetParam()), 2, *ops_, DType::F32};
  std::vector<int32_t> tokens_ = std::vector<int32_t>(2 * kLength);  // two sequences
};

TEST_P(Decoder, LogitsAtEveryPositionMatchTheFullForward) {
  const auto want = full_logits(model_, tokens_, 1, kLength);
  std::vector<float> got;
  double worst = 0;

  // A token at a time: every position is checked.
  GptDecoder single(model_, 1, 1);
  for (int64_t i = 0; i < kLength; ++i) {
    single.feed(&tokens_[static_cast<size_t>(i)], 1);
    single.logits(0, got);
    worst = std::max(worst, relative_error(got, want[0][static_cast<size_t>(i)]));
    EXPECT_LT(relative_error(got, want[0][static_cast<size_t>(i)]), kTolerance) << "position " << i;
  }
  EXPECT_EQ(single.position(), kLength);

  // The prompt in one call, then single tokens; and the prompt through chunks of 2.
  for (const int64_t chunk : {int64_t{64}, int64_t{2}}) {
    GptDecoder decoder(model_, 1, chunk);
    decoder.feed(tokens_.data(), 5);
    for (int64_t i = 4; i < kLength; ++i) {
      if (i > 4) decoder.feed(&tokens_[static_cast<size_t>(i)], 1);
      decoder.logits(0, got);
      EXPECT_LT(relative_error(got, want[0][static_cast<size_t>(i)]), kTolerance)
          << "position " << i << ", chunk " << chunk;
    }
  }

  // After reset() the positions start over.
  single.reset();
  single.feed(tokens_.data(), 3);
  single.logits(0, got);
  EXPECT_LT(relative_error(got, want[0][2]), kTolerance) << "after reset";
  std::printf("decoder %s: worst relative error %.2e\n", GetParam().c_str(), worst);
}

TEST_P(Decoder, SequencesInLockstepMatchTheFullForward) {
  const auto want = full_logits(model_, tokens_, 2, kLength);
  GptDecoder decoder(model_, 2, 4);
  // Each sequence's first token, then the rest of both in one call; tokens packed [b, t].
  const std::vector<int32_t> first = {tokens_[0], tokens_[kLength]};
  decoder.feed(first.data(), 1);
  std::vector<float> got;
  std::vector<int32_t> rest;
  for (int64_t b = 0; b < 2; ++b)
    rest.insert(rest.end(), tokens_.begin() + b * kLength + 1, tokens_.begin() + (b + 1) * kLength);
  for (int64_t b = 0; b < 2; ++b) {
    decoder.logits(b, got);
    EXPECT_LT(relative_error(got, want[static_cast<size_t>(b)][0]), kTolerance) << "sequence " << b;
  }
  decoder.feed(rest.data(), kLength - 1);
  for (int64_t b = 0; b < 2; ++b) {
    decoder.logits(b, got);
    EXPECT_LT(relative_error(got, want[static_cast<size_t>(b)].back()), kTolerance)
        << "sequence " << b;
  }
}

TEST_P(Decoder, RefusesPositionsPastTheContext) {
  GptDecoder decoder(model_, 1);
  std::vector<int32_t> ids(17, 1);
  decoder.feed(ids.data(), 16);
  EXPECT_EQ(test::error_of([&] { decoder.feed(ids.data(), 1); }),
            "decoder: positions 16..17 do not fit the context of model.seq_len=16");
  decoder.reset();
  ids[0] = 50;
  EXPECT_EQ(test::error_of([&] { decoder.feed(ids.data(), 1); }),
            "token id 50 is outside model.vocab_size=50");
}

INSTANTIATE_TEST_SUITE_P(Arch, Decoder, testing::Values("gpt2", "llama", "qwen2", "qwen3", "gpt2_lora", "llama_lora", "mla",
                                                     "mla_direct_q", "mla_yarn"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace kiln
