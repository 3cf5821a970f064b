// The CUDA attention_decode against its CPU twin, in fp32, bf16 and fp16: the same qkv fed
// through the caches in chunks (a prompt, then single tokens) gives the same output at every
// position and the same cache contents, with grouped-query heads and head dims 64 and 128.
// The GPU output is poisoned with NaN before each call so anything left unwritten shows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "trainer/memory/host_copy.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

class CudaAttentionDecode : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    gpu_ = make_cuda_ops(0, AttentionChoice::Kiln);
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
  Tensor cpu(Shape shape) { return alloc(*cpu_, cpu_memory_, shape, DType::F32); }
  Tensor gpu(Shape shape) { return alloc(*gpu_, gpu_memory_, shape, GetParam()); }
  double tolerance() const {
    return GetParam() == DType::BF16 ? 1e-2 : GetParam() == DType::F16 ? 5e-3 : 1e-5;
  }
  // ||gpu - cpu|| / ||cpu|| over the whole tensor.
  double relative_error(const Tensor& on_gpu, const Tensor& on_cpu) {
    const std::vector<double> got = copy_to_doubles(*gpu_, on_gpu);
    const std::vector<double> want = copy_to_doubles(*cpu_, on_cpu);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(got[i])) return INFINITY;
      diff += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
    return std::sqrt(diff / std::max(norm, 1e-30));
  }

  std::unique_ptr<Ops> cpu_ = make_cpu_ops(2);
  std::unique_ptr<Ops> gpu_;
  std::vector<void*> cpu_memory_, gpu_memory_;
  Random rng_{2025};
};

TEST_P(CudaAttentionDecode, MatchesTheCpuAtEveryPosition) {
  constexpr int64_t B = 2, capacity = 80;
  // The last: latent attention's multi-query rows, DeepSeek-V3's 512 + 64 (the kernel's wide
  // lanes).
  for (const AttentionShape heads : {AttentionShape{8, 2, 64}, AttentionShape{4, 4, 128}, AttentionShape{4, 1, 576}}) {
    const int64_t W = heads.qkv_width(), O = heads.n_head * heads.head_dim;
    const int64_t KVW = heads.n_kv_head * heads.head_dim;
    const Tensor k_cpu = cpu({B, capacity, KVW}), v_cpu = cpu({B, capacity, KVW});
    const Tensor k_gpu = gpu({B, capacity, KVW}), v_gpu = gpu({B, capacity, KVW});
    int64_t pos = 0;
    for (const int64_t n : {int64_t{37}, int64_t{1}, int64_t{1}, int64_t{5}, int64_t{1}}) {
      const Tensor qkv_gpu = gpu({B, n, W}), qkv_cpu = cpu({B, n, W});
      std::vector<double> values(static_cast<size_t>(B * n * W));
      for (double& v : values) v = rng_.normal();
      copy_from_doubles(*gpu_, qkv_gpu, values);
      copy_from_doubles(*cpu_, qkv_cpu, copy_to_doubles(*gpu_, qkv_gpu));  // the rounded values
      const Tensor out_gpu = gpu({B, n, O}), out_cpu = cpu({B, n, O});
      gpu_->fill(out_gpu, std::numeric_limits<double>::quiet_NaN());
      cpu_->attention_decode(out_cpu, k_cpu, v_cpu, qkv_cpu, pos, heads);
      gpu_->attention_decode(out_gpu, k_gpu, v_gpu, qkv_gpu, pos, heads);
      const std::string what = "heads " + std::to_string(heads.n_head) + "/" +
                               std::to_string(heads.n_kv_head) + " x " +
                               std::to_string(heads.head_dim) + ", positions " +
                               std::to_string(pos) + ".." + std::to_string(pos + n);
      EXPECT_LE(relative_error(out_gpu, out_cpu), tolerance()) << what;
      pos += n;
    }
    EXPECT_EQ(relative_error(k_gpu, k_cpu), 0.0) << "the key cache holds the same values";
    EXPECT_EQ(relative_error(v_gpu, v_cpu), 0.0) << "the value cache holds the same values";
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, CudaAttentionDecode,
                         testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace kiln
