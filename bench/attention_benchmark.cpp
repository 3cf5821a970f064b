// Causal attention on the GPU, kiln's kernels beside cuDNN's fused flash attention
// (backend.attention=kiln and =cudnn), forward and backward, at FlashAttention's benchmark
// shape: 16k tokens as 4 sequences of 4096, model width 2048 (32 heads of 64 or 16 of 128),
// bf16, plain heads or groups of 4 query heads per key/value head.
//
//   build/kiln_bench_attention [--benchmark_filter=REGEX] [--benchmark_min_time=SECONDS]
//
// Each name reads BM_attention_{forward,backward}/cudnn:{0,1}/head_dim:{64,128}/group:{1,4}.
// Each iteration waits for the GPU, so the wall clock is the kernels' time (a wait costs
// microseconds; a call, milliseconds). Counter TFLOPS counts FlashAttention's way: the
// forward's two products over the causal half of the scores, 4 B H T^2 D / 2, and the
// backward's five, 2.5 times that. A case whose kernels cannot run here (no GPU, no cuDNN)
// is reported as an error with the reason and the others go on.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "base/check.h"
#include "kernels/ops.h"
#include "trainer/memory/host_copy.h"
#include "trainer/util/random.h"

namespace {

using kiln::Tensor;

constexpr int64_t kBatch = 4, kSeq = 4096, kWidth = 2048;

// The tensors of one case, on the GPU, released with it.
struct Case {
  std::unique_ptr<kiln::Ops> ops;
  kiln::AttentionShape heads;
  Tensor qkv, out, lse, dout, dqkv;

  Tensor make(kiln::Shape shape, kiln::DType dtype) {
    Tensor t{nullptr, dtype, shape, kiln::Device::Cuda};
    t.data = ops->allocate(t.bytes());
    return t;
  }
  // Random values: attention's speed does not depend on them, but a NaN would hide a fault.
  Tensor random(kiln::Shape shape) {
    Tensor t = make(shape, kiln::DType::BF16);
    kiln::Random rng(static_cast<uint64_t>(shape.numel()));
    std::vector<double> values(static_cast<size_t>(shape.numel()));
    for (double& v : values) v = rng.normal();
    kiln::copy_from_doubles(*ops, t, values);
    return t;
  }
  ~Case() {
    if (!ops) return;
    for (const Tensor* t : {&qkv, &out, &lse, &dout, &dqkv})
      if (t->data != nullptr) ops->release(t->data);
  }
};

// The case of a benchmark's arguments, or null with the reason given to `state`.
std::unique_ptr<Case> make_case(benchmark::State& state) {
  if (kiln::cuda_device_count() == 0) {
    state.SkipWithError("no GPU");
    return nullptr;
  }
  const bool cudnn = state.range(0) == 1;
  const int head_dim = static_cast<int>(state.range(1));
  const int group = static_cast<int>(state.range(2));
  auto c = std::make_unique<Case>();
  try {
    c->ops = kiln::make_cuda_ops(0, cudnn ? kiln::AttentionChoice::Cudnn : kiln::AttentionChoice::Kiln);
    const int n_head = static_cast<int>(kWidth / head_dim);
    c->heads = {n_head, n_head / group, head_dim};
    c->ops->reserve({kBatch, kSeq, c->heads, kiln::DType::BF16});
    const int64_t W = c->heads.qkv_width();
    c->qkv = c->random({kBatch, kSeq, W});
    c->dout = c->random({kBatch, kSeq, kWidth});
    c->out = c->make({kBatch, kSeq, kWidth}, kiln::DType::BF16);
    c->dqkv = c->make({kBatch, kSeq, W}, kiln::DType::BF16);
    c->lse = c->make({kBatch * n_head * kSeq}, kiln::DType::F32);
  } catch (const kiln::Error& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
  state.SetLabel(c->ops->attention());
  return c;
}

double forward_flops(const Case& c) {
  return 4.0 * kBatch * c.heads.n_head * static_cast<double>(kSeq) * kSeq * c.heads.head_dim / 2;
}

void BM_attention_forward(benchmark::State& state) {
  const std::unique_ptr<Case> c = make_case(state);
  if (!c) return;
  for (auto _ : state) {
    c->ops->attention_forward(c->out, c->lse, c->qkv, c->heads, Tensor{});
    c->ops->synchronize();
  }
  state.counters["TFLOPS"] = benchmark::Counter(forward_flops(*c) / 1e12,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_attention_backward(benchmark::State& state) {
  const std::unique_ptr<Case> c = make_case(state);
  if (!c) return;
  c->ops->attention_forward(c->out, c->lse, c->qkv, c->heads, Tensor{});
  for (auto _ : state) {
    c->ops->attention_backward(c->dqkv, c->dout, c->qkv, c->out, c->lse, c->heads, Tensor{});
    c->ops->synchronize();
  }
  state.counters["TFLOPS"] = benchmark::Counter(2.5 * forward_flops(*c) / 1e12,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"cudnn", "head_dim", "group"})
      ->ArgsProduct({{0, 1}, {64, 128}, {1, 4}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace

BENCHMARK(BM_attention_forward)->Apply(shapes);
BENCHMARK(BM_attention_backward)->Apply(shapes);
BENCHMARK_MAIN();
