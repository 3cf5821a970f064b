// Model FLOPs by hand for GPT-2 124M and Llama 1B, and against the parameters kiln lays out.
#include "trainer/model/flops.h"

#include <gtest/gtest.h>

#include "tests/small_model.h"
#include "trainer/model/gpt_model.h"

namespace kiln {
namespace {

ModelConfig gpt2_124m() {
  ModelConfig m;
  m.n_layer = 12;
  m.n_head = 12;
  m.d_model = 768;
  m.vocab_size = 50257;
  m.seq_len = 1024;
  return m;
}

ModelConfig llama_1b() {  // configs/llama-1b.json
  ModelConfig m;
  m.arch = "llama";
  m.n_layer = 16;
  m.n_head = 32;
  m.n_kv_head = 8;
  m.d_model = 2048;
  m.d_ff = 8192;
  m.vocab_size = 128256;
  m.seq_len = 2048;
  return m;
}

TEST(Flops, Gpt2_124m) {
  // Per layer: norm1 2*768 = 1,536; qkv 768*2304 + 2304 = 1,771,776; attention proj
  // 768*768 + 768 = 590,592; norm2 1,536; fc 768*3072 + 3072 = 2,362,368; proj
  // 3072*768 + 768 = 2,360,064. Sum 7,087,872; x 12 = 85,054,464; final norm 1,536 ->
  // 85,056,000; tied head 50257*768 = 38,597,376 -> N = 123,653,376 (= GPT-2's 124,439,808
  // less wpe's 1024*768 = 786,432).
  const ModelConfig m = gpt2_124m();
  EXPECT_EQ(flops_parameter_count(m), 123'653'376);
  // 6 N = 741,920,256; 12 L d s = 12*12*768*1024 = 113,246,208.
  EXPECT_EQ(model_flops_per_token(m), 855'166'464);
  EXPECT_EQ(recomputed_flops_per_token(m), 2 * 12 * 768 * 1024);
}

TEST(Flops, Llama1bWithGroupedQueriesAndSwiGLU) {
  // Per layer: norm1 2,048; qkv 2048*(32 + 2*8)*64 = 6,291,456; proj 2048*2048 =
  // 4,194,304; norm2 2,048; fc [2*8192, 2048] = 33,554,432; proj 8192*2048 = 16,777,216.
  // Sum 60,821,504; x 16 = 973,144,064; final norm 2,048; head 128256*2048 = 262,668,288
  // -> N = 1,235,814,400. No biases; no position table; the head counts tied or not.
  ModelConfig m = llama_1b();
  EXPECT_EQ(flops_parameter_count(m), 1'235'814'400);
  // 6 N = 7,414,886,400; 12 L d s = 12*16*2048*2048 = 805,306,368.
  EXPECT_EQ(model_flops_per_token(m), 8'220'192'768);
  m.tie_embeddings = false;
  EXPECT_EQ(model_flops_per_token(m), 8'220'192'768);
}

// N is what kiln lays out, less the embeddings (vocabulary padding excluded), plus the head
// when it is tied and once more at each multi-token prediction depth: a new parameter in the
// model must show up here too.
TEST(Flops, CountMatchesTheModelsParameters) {
  for (const std::string variant : {"gpt2", "llama", "qwen3", "mla", "mla_direct_q", "llama_mtp", "mla_mtp"}) {
    const bool llama = variant != "gpt2";
    ModelConfig m;
    m.arch = llama ? "llama" : "gpt2";
    m.qk_norm = variant == "qwen3";
    m.n_layer = 2;
    m.n_head = 4;
    m.n_kv_head = llama ? 2 : 0;
    m.d_model = 32;
    m.d_ff = llama ? 48 : 0;
    m.vocab_size = 61;
    m.seq_len = 16;
    m.tie_embeddings = !llama;
    m.make_vocab_size_divisible_by = 8;
    if (variant.starts_with("mla")) test::use_latent_attention(m, variant == "mla_direct_q" ? 0 : 12, 10, 6, 4, 5);
    m.mtp_depth = variant.ends_with("_mtp") ? 2 : 0;
    auto ops = make_cpu_ops(1);
    GptModel model(m, 1, *ops);
    int64_t expected = model.parameters().count();
    expected -= int64_t{m.vocab_size} * m.d_model;                // wte
    if (!llama) expected -= int64_t{m.seq_len} * m.d_model;       // wpe
    if (m.tie_embeddings) expected += int64_t{m.vocab_size} * m.d_model;  // the head
    expected += int64_t{m.mtp_depth} * m.vocab_size * m.d_model;  // the head again at each depth
    EXPECT_EQ(flops_parameter_count(m), expected) << variant;
  }
}

// DeepSeek-V3's latent attention by hand, per layer: q_a 7168 x 1536, its norm, q_b 1536 x
// 128 (128 + 64), kv_a 7168 x (512 + 64), its norm, kv_b 512 x 128 (128 + 128), o 128 x 128 x
// 7168; and its attention FLOPs, 6 s H (192 + 128) a layer.
TEST(Flops, LatentAttentionByHand) {
  ModelConfig m;
  m.arch = "llama";
  m.n_layer = 1;
  m.n_head = 128;
  m.d_model = 7168;
  m.seq_len = 4096;
  test::use_latent_attention(m, 1536, 512, 128, 64, 128);
  const int64_t by_hand =
      int64_t{7168} * 1536 + 1536 + int64_t{1536} * 128 * 192 + int64_t{7168} * 576 + 512 + int64_t{512} * 128 * 256 +
      int64_t{128} * 128 * 7168;
  EXPECT_EQ(attention_parameter_count(m), by_hand);
  EXPECT_EQ(by_hand, 187'107'328);
  m.d_ff = 1;
  m.vocab_size = 1;
  EXPECT_EQ(model_flops_per_token(m) - 6 * flops_parameter_count(m), int64_t{6} * 4096 * 128 * (192 + 128));
}


TEST(Flops, AnMoeLayerCountsTheExpertsATokenTakes) {
  for (const bool llama : {false, true}) {
    ModelConfig m;
    m.arch = llama ? "llama" : "gpt2";
    m.n_layer = 2;
    m.n_head = 4;
    m.n_kv_head = llama ? 2 : 0;
    m.d_model = 32;
    m.vocab_size = 61;
    m.seq_len = 16;
    m.tie_embeddings = true;
    m.make_vocab_size_divisible_by = 8;
    m.moe.num_experts = 3;
    m.moe.top_k = 3;  // every expert active: the count is every parameter's
    m.moe.ffn_hidden = 20;
    m.moe.shared_experts = 1;
    m.moe.layer_freq = 2;  // layer 0 only
    auto ops = make_cpu_ops(1);
    GptModel model(m, 1, *ops);
    int64_t all = model.parameters().count();
    if (!llama) all -= int64_t{m.seq_len} * m.d_model;  // wpe
    EXPECT_EQ(flops_parameter_count(m), all) << m.arch;
    // One expert of three active: two experts' products fewer.
    const int64_t expert = (llama ? 2 : 1) * 20 * 32 + 20 * 32 + (llama ? 0 : 20 + 32);
    m.moe.top_k = 1;
    EXPECT_EQ(flops_parameter_count(m), all - 2 * expert) << m.arch;
  }
}

TEST(Flops, PeakAndUtilisation) {
  EXPECT_EQ(peak_bf16_flops("cuda:0 (NVIDIA H100 80GB HBM3)"), 989e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA H200"), 989e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA H100 PCIe"), 756e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_EQ(peak_bf16_flops("cpu (2 threads)"), 0);
  // 100K tokens/s of GPT-2 124M on an H100: 85.5 TFLOP/s, 8.6% of 989.
  EXPECT_NEAR(utilisation(1e5, model_flops_per_token(gpt2_124m()), 989e12), 0.08647, 1e-5);
  EXPECT_EQ(utilisation(1e5, 1000, 0), 0);
}

}  // namespace
}  // namespace kiln
