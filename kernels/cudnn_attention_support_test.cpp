#include "kernels/cudnn_attention_support.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

// GPT-2 124M's attention on an H100 with the cuDNN of the toolkit here.
CudnnAttentionCase gpt2_on_h100() {
  CudnnAttentionCase c;
  c.dtype = DType::BF16;
  c.seq = 1024;
  c.n_head = 12;
  c.n_kv_head = 12;
  c.head_dim = 64;
  c.compute_capability = 90;
  c.cudnn_version = 91900;
  return c;
}

TEST(CudnnAttentionSupport, TrainingShapesInBf16AndFp16AreSupported) {
  CudnnAttentionCase c = gpt2_on_h100();
  EXPECT_EQ(cudnn_attention_unsupported(c), "");
  c.dtype = DType::F16;
  EXPECT_EQ(cudnn_attention_unsupported(c), "");
  // Llama's grouped-query heads at head dim 128, on Ampere too.
  c.n_head = 32;
  c.n_kv_head = 8;
  c.head_dim = 128;
  c.compute_capability = 80;
  EXPECT_EQ(cudnn_attention_unsupported(c), "");
}

TEST(CudnnAttentionSupport, Fp32IsKilnsAlone) {
  CudnnAttentionCase c = gpt2_on_h100();
  c.dtype = DType::F32;
  EXPECT_EQ(cudnn_attention_unsupported(c), "fp32 tensors (bf16 or fp16 needed)");
}

TEST(CudnnAttentionSupport, DocumentResetsFallBack) {
  CudnnAttentionCase c = gpt2_on_h100();
  c.key_starts = true;
  EXPECT_EQ(cudnn_attention_unsupported(c), "document resets (data.reset_attention_mask)");
}

TEST(CudnnAttentionSupport, HeadDimsAreMultiplesOfEightUpTo128Or256OnHopper) {
  CudnnAttentionCase c = gpt2_on_h100();
  c.head_dim = 100;
  EXPECT_EQ(cudnn_attention_unsupported(c),
            "head dim 100 on sm_90 (a multiple of 8 up to 256 needed)");
  c.head_dim = 256;
  EXPECT_EQ(cudnn_attention_unsupported(c), "");
  c.compute_capability = 80;
  EXPECT_EQ(cudnn_attention_unsupported(c),
            "head dim 256 on sm_80 (a multiple of 8 up to 128 needed)");
  c.compute_capability = 100;  // Blackwell's backward stops at 128 as well
  EXPECT_NE(cudnn_attention_unsupported(c), "");
  c.head_dim = 96;
  EXPECT_EQ(cudnn_attention_unsupported(c), "");
}

TEST(CudnnAttentionSupport, OlderGpusAndCudnnsAreRefused) {
  CudnnAttentionCase c = gpt2_on_h100();
  c.compute_capability = 75;
  EXPECT_EQ(cudnn_attention_unsupported(c), "sm_75 (Ampere, sm_80, or newer needed)");
  c = gpt2_on_h100();
  c.cudnn_version = 8907;
  EXPECT_EQ(cudnn_attention_unsupported(c),
            "cuDNN 8.9.7 (kiln's graphs are written for cuDNN 9)");
}

TEST(CudnnAttentionSupport, SequencesOffTheTileNeedCudnnAfter9150) {
  CudnnAttentionCase c = gpt2_on_h100();
  c.seq = 1000;
  EXPECT_EQ(cudnn_attention_unsupported(c), "");
  c.cudnn_version = 91500;
  EXPECT_EQ(cudnn_attention_unsupported(c),
            "sequence length 1000 with cuDNN 9.15.0 (a multiple of 128 needed up to cuDNN 9.15.0)");
  c.seq = 1024;
  EXPECT_EQ(cudnn_attention_unsupported(c), "");
}

TEST(CudnnAttentionSupport, VersionsReadAsCudnnWritesThem) {
  EXPECT_EQ(cudnn_version_text(91900), "9.19.0");
  EXPECT_EQ(cudnn_version_text(90102), "9.1.2");
  EXPECT_EQ(cudnn_version_text(8907), "8.9.7");
}

}  // namespace
}  // namespace kiln
