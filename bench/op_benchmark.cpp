// Each CPU op at the shapes of the tiny config's training step (configs/tiny.json:
// batch 32, seq 128, d_model 128, 4 heads, d_ff 512, padded vocab 264), so a change to a
// kernel can be timed alone:
//
//   build/kiln_bench_ops [--benchmark_filter=REGEX] [--benchmark_min_time=SECONDS]
//
// Each op runs on the same buffers over and over, so they stay in cache; the _cold
// variants of attention evict them before every call, as the step does.
//
// Threads: every core (KILN_THREADS=N to change).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "trainer/train/backend.h"
#include "trainer/util/random.h"

namespace {

using kiln::Tensor;

constexpr int64_t B = 32, T = 128, C = 128, F = 512, Vp = 264, V = 257;
constexpr kiln::AttentionShape kHeads{4, 4, 32};

struct Fixture {
  std::unique_ptr<kiln::Ops> ops;
  std::vector<std::vector<float>> storage;

  Fixture() {
    kiln::BackendConfig backend;
    const char* threads = std::getenv("KILN_THREADS");
    backend.threads = threads ? std::atoi(threads) : 0;
    ops = kiln::make_cpu_ops(kiln::resolved_threads(backend));
    ops->reserve({B, T, kHeads});
  }
  // Random values, never zeros, so no op takes a shortcut.
  Tensor make(kiln::Shape shape) {
    kiln::Random rng(storage.size() + 1);
    storage.emplace_back(static_cast<size_t>(shape.numel()));
    for (float& v : storage.back()) v = static_cast<float>(0.5 * rng.normal());
    return Tensor{storage.back().data(), kiln::DType::F32, shape, kiln::Device::Cpu};
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_matmul_qkv(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor x = f.make({B * T, C}), w = f.make({3 * C, C}), y = f.make({B * T, 3 * C});
  for (auto _ : state) f.ops->matmul(y, x, false, w, true, false);
}

void BM_matmul_mlp_fc(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor x = f.make({B * T, C}), w = f.make({F, C}), y = f.make({B * T, F});
  for (auto _ : state) f.ops->matmul(y, x, false, w, true, false);
}

void BM_matmul_weight_grad(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor dy = f.make({B * T, F}), x = f.make({B * T, C}), dw = f.make({F, C});
  for (auto _ : state) f.ops->matmul(dw, dy, true, x, false, true);
}

void BM_attention_forward(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor qkv = f.make({B, T, 3 * C}), out = f.make({B, T, C}), lse = f.make({B * 4 * T});
  for (auto _ : state) f.ops->attention_forward(out, lse, qkv, kHeads, Tensor{});
}

void BM_attention_backward(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor qkv = f.make({B, T, 3 * C}), out = f.make({B, T, C}), lse = f.make({B * 4 * T});
  const Tensor dout = f.make({B, T, C}), dqkv = f.make({B, T, 3 * C});
  f.ops->attention_forward(out, lse, qkv, kHeads, Tensor{});
  for (auto _ : state) f.ops->attention_backward(dqkv, dout, qkv, out, lse, kHeads, Tensor{});
}

// Attention with Megatron's reset_attention_mask over rows that pack four documents of 32
// tokens: each query attends from the first token of its document.
Tensor document_starts() {
  static std::vector<int32_t> starts(static_cast<size_t>(B * T));
  for (size_t i = 0; i < starts.size(); ++i) starts[i] = static_cast<int32_t>(i % T / 32 * 32);
  return Tensor{starts.data(), kiln::DType::I32, {B, T}, kiln::Device::Cpu};
}

void BM_attention_forward_documents(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor qkv = f.make({B, T, 3 * C}), out = f.make({B, T, C}), lse = f.make({B * 4 * T});
  const Tensor starts = document_starts();
  for (auto _ : state) f.ops->attention_forward(out, lse, qkv, kHeads, starts);
}

void BM_attention_backward_documents(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor qkv = f.make({B, T, 3 * C}), out = f.make({B, T, C}), lse = f.make({B * 4 * T});
  const Tensor dout = f.make({B, T, C}), dqkv = f.make({B, T, 3 * C});
  const Tensor starts = document_starts();
  f.ops->attention_forward(out, lse, qkv, kHeads, starts);
  for (auto _ : state) f.ops->attention_backward(dqkv, dout, qkv, out, lse, kHeads, starts);
}

// Writes 64 MB, more than the caches hold, outside the timing: the op then reads its inputs
// from memory, as in the training step, where the other layers' activations pass between
// a layer's forward and its backward.
void evict_caches(benchmark::State& state) {
  static std::vector<float> sweep(16 << 20);
  state.PauseTiming();
  for (size_t i = 0; i < sweep.size(); i += 16) sweep[i] += 1.0f;
  state.ResumeTiming();
}

void BM_attention_forward_cold(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor qkv = f.make({B, T, 3 * C}), out = f.make({B, T, C}), lse = f.make({B * 4 * T});
  for (auto _ : state) {
    evict_caches(state);
    f.ops->attention_forward(out, lse, qkv, kHeads, Tensor{});
  }
}

void BM_attention_backward_cold(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor qkv = f.make({B, T, 3 * C}), out = f.make({B, T, C}), lse = f.make({B * 4 * T});
  const Tensor dout = f.make({B, T, C}), dqkv = f.make({B, T, 3 * C});
  f.ops->attention_forward(out, lse, qkv, kHeads, Tensor{});
  for (auto _ : state) {
    evict_caches(state);
    f.ops->attention_backward(dqkv, dout, qkv, out, lse, kHeads, Tensor{});
  }
}

void BM_gelu_forward(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor x = f.make({B * T, F}), y = f.make({B * T, F});
  for (auto _ : state) f.ops->gelu_forward(y, x);
}

void BM_gelu_backward(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor x = f.make({B * T, F}), dy = f.make({B * T, F}), dx = f.make({B * T, F});
  for (auto _ : state) f.ops->gelu_backward(dx, x, dy);
}

void BM_layernorm_forward(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor x = f.make({B * T, C}), y = f.make({B * T, C}), w = f.make({C}), b = f.make({C});
  const Tensor mean = f.make({B * T}), rstd = f.make({B * T});
  for (auto _ : state) f.ops->layernorm_forward(y, mean, rstd, x, w, b, 1e-5);
}

void BM_layernorm_backward(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor x = f.make({B * T, C}), y = f.make({B * T, C}), w = f.make({C}), b = f.make({C});
  const Tensor mean = f.make({B * T}), rstd = f.make({B * T}), dx = f.make({B * T, C});
  f.ops->layernorm_forward(y, mean, rstd, x, w, b, 1e-5);
  for (auto _ : state) f.ops->layernorm_backward(dx, w, b, y, x, w, mean, rstd);
}

void BM_cross_entropy(benchmark::State& state) {
  Fixture& f = fixture();
  const Tensor logits = f.make({B * T, Vp}), losses = f.make({B * T}), lse = f.make({B * T});
  std::vector<int32_t> targets(static_cast<size_t>(B * T));
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int32_t>(i % V);
  const Tensor t{targets.data(), kiln::DType::I32, {B * T}, kiln::Device::Cpu};
  for (auto _ : state) {
    f.ops->cross_entropy_forward(losses, lse, logits, t, V);
    f.ops->cross_entropy_backward(logits, logits, lse, t, V, 1e-4);
  }
}

void BM_adamw(benchmark::State& state) {
  Fixture& f = fixture();
  const int64_t n = 840000;  // the tiny model's parameters
  const Tensor p = f.make({n}), g = f.make({n}), m = f.make({n}), v = f.make({n});
  std::vector<int64_t> one_segment = {0, n, 1};
  const Tensor segments{one_segment.data(), kiln::DType::I64, {1, 3}, kiln::Device::Cpu};
  kiln::AdamWStep step{1e-3, 0.9, 0.95, 1e-8, 0.1, 1, 1.0, Tensor{}};
  for (auto _ : state) f.ops->adamw(p, g, m, v, Tensor{}, segments, step);
}

}  // namespace

BENCHMARK(BM_matmul_qkv)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_matmul_mlp_fc)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_matmul_weight_grad)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_forward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_backward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_forward_cold)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_backward_cold)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_forward_documents)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_backward_documents)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gelu_forward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gelu_backward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm_forward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm_backward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cross_entropy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_adamw)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
