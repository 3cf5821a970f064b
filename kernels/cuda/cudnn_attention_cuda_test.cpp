// cuDNN's fused attention (backend.attention=cudnn, kernels/cuda/cudnn_attention.cu) against
// the CPU reference: out, lse and dqkv for plain and grouped-query heads, head dims 64 and
// 128, several sequence lengths, bf16 and fp16, with the GPU's outputs poisoned with NaN
// first. Both sides read the same values (rounded to the GPU dtype); the tolerance is on the
// relative error of the whole output, ||gpu - cpu|| / ||cpu||, as in ops_cuda_test.cpp (bf16
// 1e-2, fp16 5e-3; lse 1e-4: cuDNN accumulates the scores in float as the CPU does, in
// another order). Also: auto falls back to kiln's kernels for document resets, and cudnn
// refuses what cuDNN cannot compute. Skips without a GPU or without cuDNN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/ops.h"
#include "trainer/memory/host_copy.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

struct Pair {
  Tensor cpu;  // F32
  Tensor gpu;  // the dtype under test, F32 for lse
};

struct Case {
  DType dtype;
  int n_head, n_kv_head, head_dim;
  int64_t seq;
};

std::string name_of(const Case& c) {
  return std::string(dtype_name(c.dtype)) + "_h" + std::to_string(c.n_head) + "kv" +
         std::to_string(c.n_kv_head) + "_d" + std::to_string(c.head_dim) + "_t" +
         std::to_string(c.seq);
}

constexpr int64_t B = 2;

class CudnnAttention : public testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    try {
      gpu_ = make_cuda_ops(0, AttentionChoice::Cudnn);
    } catch (const Error& e) {
      GTEST_SKIP() << "skipped: " << e.what();
    }
  }
  void TearDown() override {
    for (void* p : cpu_memory_) cpu_->release(p);
    for (void* p : gpu_memory_) gpu_->release(p);
  }

  Tensor alloc(Ops& ops, std::vector<void*>& owned, Shape shape, DType type) {
    Tensor t{nullptr, type, shape, ops.device()};
    t.data = ops.allocate(t.bytes());
    owned.push_back(t.data);
    return t;
  }
  // Random values, none zero, the same on both sides.
  Pair random(Shape shape, DType type) {
    Pair p{alloc(*cpu_, cpu_memory_, shape, DType::F32), alloc(*gpu_, gpu_memory_, shape, type)};
    std::vector<double> values(static_cast<size_t>(shape.numel()));
    for (double& v : values) {
      v = rng_.normal();
      if (std::abs(v) < 1e-3) v = 1e-3;
    }
    copy_from_doubles(*gpu_, p.gpu, values);
    copy_from_doubles(*cpu_, p.cpu, copy_to_doubles(*gpu_, p.gpu));
    return p;
  }
  // An output: zero on the CPU, NaN on the GPU so that anything left unwritten shows.
  Pair output(Shape shape, DType type) {
    Pair p{alloc(*cpu_, cpu_memory_, shape, DType::F32), alloc(*gpu_, gpu_memory_, shape, type)};
    cpu_->fill(p.cpu, 0.0);
    gpu_->fill(p.gpu, std::numeric_limits<double>::quiet_NaN());
    return p;
  }
  Pair key_starts(int64_t seq) {
    // Documents of 40 tokens: each query attends from the first token of its own.
    std::vector<int32_t> starts;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < seq; ++t) starts.push_back(static_cast<int32_t>(t / 40 * 40));
    Pair p{alloc(*cpu_, cpu_memory_, {B, seq}, DType::I32),
           alloc(*gpu_, gpu_memory_, {B, seq}, DType::I32)};
    cpu_->copy_from_host(p.cpu, starts.data());
    gpu_->copy_from_host(p.gpu, starts.data());
    return p;
  }

  // The relative error of columns [begin, end) of each row of the last dim (the q, k or v
  // heads of dqkv: a wrong gradient shows which).
  void expect_close(const Pair& p, const std::string& what, double tol, int64_t begin = 0,
                    int64_t end = -1) {
    const std::vector<double> want = copy_to_doubles(*cpu_, p.cpu);
    const std::vector<double> got = copy_to_doubles(*gpu_, p.gpu);
    const int64_t width = p.cpu.shape[p.cpu.shape.rank - 1];
    if (end < 0) end = width;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const int64_t column = static_cast<int64_t>(i) % width;
      if (column < begin || column >= end) continue;
      ASSERT_FALSE(std::isnan(got[i])) << what << "[" << i << "] was not written";
      diff += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
    EXPECT_LE(std::sqrt(diff / std::max(norm, 1e-30)), tol) << what;
  }

  // Forward and backward of one case on both sides; key_starts on both when given.
  void compare(const Case& c, Ops& gpu, const Pair& starts) {
    const AttentionShape s{c.n_head, c.n_kv_head, c.head_dim};
    const int64_t W = s.qkv_width(), O = int64_t{c.n_head} * c.head_dim;
    cpu_->reserve({B, c.seq, s});
    gpu.reserve({B, c.seq, s, c.dtype});
    const double tol = c.dtype == DType::BF16 ? 1e-2 : 5e-3;
    const std::string what = name_of(c);

    const Pair qkv = random({B, c.seq, W}, c.dtype), dout = random({B, c.seq, O}, c.dtype);
    const Pair out = output({B, c.seq, O}, c.dtype), dqkv = output({B, c.seq, W}, c.dtype);
    const Pair lse = output({B * c.n_head * c.seq}, DType::F32);
    // The tensors are gpu_'s, filled on its stream; `gpu` may be another ops with its own.
    gpu_->synchronize();
    cpu_->attention_forward(out.cpu, lse.cpu, qkv.cpu, s, starts.cpu);
    gpu.attention_forward(out.gpu, lse.gpu, qkv.gpu, s, starts.gpu);
    cpu_->attention_backward(dqkv.cpu, dout.cpu, qkv.cpu, out.cpu, lse.cpu, s, starts.cpu);
    gpu.attention_backward(dqkv.gpu, dout.gpu, qkv.gpu, out.gpu, lse.gpu, s, starts.gpu);
    gpu.synchronize();
    expect_close(out, "out " + what, tol);
    expect_close(lse, "lse " + what, 1e-4);
    const int64_t k = int64_t{c.n_head} * c.head_dim, v = k + int64_t{c.n_kv_head} * c.head_dim;
    expect_close(dqkv, "dq " + what, tol, 0, k);
    expect_close(dqkv, "dk " + what, tol, k, v);
    expect_close(dqkv, "dv " + what, tol, v, W);
  }

  std::unique_ptr<Ops> cpu_ = make_cpu_ops(2);
  std::unique_ptr<Ops> gpu_;
  std::vector<void*> cpu_memory_, gpu_memory_;
  Random rng_{2025};
};

TEST_F(CudnnAttention, MatchesTheCpuForPlainAndGroupedHeads) {
  for (DType dtype : {DType::BF16, DType::F16})
    for (int head_dim : {64, 128})
      for (auto [n_head, n_kv_head] : {std::pair{4, 4}, std::pair{8, 2}})
        for (int64_t seq : {128, 512, 1024}) {
          const Case c{dtype, n_head, n_kv_head, head_dim, seq};
          SCOPED_TRACE(name_of(c));
          compare(c, *gpu_, Pair{});
          EXPECT_EQ(gpu_->attention().rfind("cuDNN ", 0), 0u) << gpu_->attention();
        }
}

// A length off cuDNN's tiles: cuDNN after 9.15.0 computes it, older ones leave it to kiln's
// kernels under auto; either way the numbers are the CPU's.
TEST_F(CudnnAttention, AutoComputesAnyLength) {
  auto gpu = make_cuda_ops(0, AttentionChoice::Auto);
  compare({DType::BF16, 8, 2, 64, 200}, *gpu, Pair{});
}

TEST_F(CudnnAttention, AutoRunsDocumentResetsOnKilnsKernels) {
  auto gpu = make_cuda_ops(0, AttentionChoice::Auto);
  const Case c{DType::BF16, 8, 2, 64, 256};
  const Pair starts = key_starts(c.seq);
  compare(c, *gpu, starts);
  // cuDNN still computes the calls without resets.
  EXPECT_EQ(gpu->attention().rfind("cuDNN ", 0), 0u) << gpu->attention();
}

TEST_F(CudnnAttention, CudnnRefusesWhatCudnnCannotCompute) {
  const AttentionShape s{4, 4, 64};
  try {
    gpu_->reserve({B, 128, s, DType::F32});
    FAIL() << "fp32 attention reserved on cuDNN";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not support fp32 tensors"), std::string::npos)
        << e.what();
  }
  gpu_->reserve({B, 128, s, DType::BF16});
  const Pair qkv = random({B, 128, s.qkv_width()}, DType::BF16);
  const Pair out = output({B, 128, 256}, DType::BF16);
  const Pair lse = output({B * 4 * 128}, DType::F32);
  try {
    gpu_->attention_forward(out.gpu, lse.gpu, qkv.gpu, s, key_starts(128).gpu);
    FAIL() << "document resets ran on cuDNN";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "backend.attention=cudnn: cuDNN's fused attention does not support document "
                 "resets (data.reset_attention_mask)");
  }
}

}  // namespace
}  // namespace kiln
