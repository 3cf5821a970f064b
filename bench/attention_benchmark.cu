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
//
// Start-up costs nothing measurable: the inputs are filled on the device by a kernel below
// (a hash of each element's index, no host numbers), and each case's ops and tensors are set
// up once, shared by its forward and backward benchmarks, which run one after the other,
// and by every run Google Benchmark makes of them.
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "kernels/ops.h"

namespace {

using kiln::Tensor;

constexpr int64_t kBatch = 4, kSeq = 4096, kWidth = 2048;

// Values in [-1, 1) from a hash of (seed, index) (splitmix64's finaliser): attention's speed
// does not depend on them, but a NaN or an all-equal input would hide a fault.
__global__ void fill_hashed(__nv_bfloat16* out, int64_t count, uint64_t seed) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  out[i] = __float2bfloat16(static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) kiln::fail(std::string(what) + ": " + cudaGetErrorString(status));
}

struct CaseKey {
  bool cudnn = false;
  int head_dim = 0;
  int group = 0;
  bool operator==(const CaseKey&) const = default;
};

// The ops and tensors of one case, on the GPU, released with it.
struct Case {
  CaseKey key;
  std::string error;  // why the case cannot run here, or ""
  std::unique_ptr<kiln::Ops> ops;
  kiln::AttentionShape heads;
  Tensor qkv, out, lse, dout, dqkv;
  bool forward_done = false;  // out and lse hold the forward's result, which backward reads

  Tensor make(kiln::Shape shape, kiln::DType dtype) {
    Tensor t{nullptr, dtype, shape, kiln::Device::Cuda};
    t.data = ops->allocate(t.bytes());
    return t;
  }
  Tensor hashed(kiln::Shape shape, uint64_t seed) {
    Tensor t = make(shape, kiln::DType::BF16);
    const int64_t count = shape.numel();
    constexpr int kThreads = 256;
    fill_hashed<<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0,
                  static_cast<cudaStream_t>(ops->stream())>>>(static_cast<__nv_bfloat16*>(t.data),
                                                              count, seed);
    check_cuda(cudaGetLastError(), "fill_hashed");
    return t;
  }
  ~Case() {
    if (!ops) return;
    for (const Tensor* t : {&qkv, &out, &lse, &dout, &dqkv})
      if (t->data != nullptr) ops->release(t->data);
  }
};

std::unique_ptr<Case> set_up(const CaseKey& key) {
  auto c = std::make_unique<Case>();
  c->key = key;
  if (kiln::cuda_device_count() == 0) {
    c->error = "no GPU";
    return c;
  }
  try {
    c->ops = kiln::make_cuda_ops(0, key.cudnn ? kiln::AttentionChoice::Cudnn : kiln::AttentionChoice::Kiln);
    const int n_head = static_cast<int>(kWidth / key.head_dim);
    c->heads = {n_head, n_head / key.group, key.head_dim};
    c->ops->reserve({kBatch, kSeq, c->heads, kiln::DType::BF16});
    const int64_t W = c->heads.qkv_width();
    c->qkv = c->hashed({kBatch, kSeq, W}, 1);
    c->dout = c->hashed({kBatch, kSeq, kWidth}, 2);
    c->out = c->make({kBatch, kSeq, kWidth}, kiln::DType::BF16);
    c->dqkv = c->make({kBatch, kSeq, W}, kiln::DType::BF16);
    c->lse = c->make({kBatch * n_head * kSeq}, kiln::DType::F32);
    c->ops->synchronize();
  } catch (const kiln::Error& e) {
    c->error = e.what();
  }
  return c;
}

// The case set up last: one case's tensors at a time (about 0.6 GB at head dim 64).
std::unique_ptr<Case> current;

// The case of a benchmark's arguments, set up at its first run and kept until a benchmark of
// another case runs, or null with the reason given to `state`.
Case* the_case(benchmark::State& state, const CaseKey& key) {
  if (!current || !(current->key == key)) {
    current.reset();  // the previous case's memory goes back first
    current = set_up(key);
  }
  if (!current->error.empty()) {
    state.SkipWithError(current->error.c_str());
    return nullptr;
  }
  state.SetLabel(current->ops->attention());
  return current.get();
}

double forward_flops(const Case& c) {
  return 4.0 * kBatch * c.heads.n_head * static_cast<double>(kSeq) * kSeq * c.heads.head_dim / 2;
}

void attention_forward(benchmark::State& state, CaseKey key) {
  Case* c = the_case(state, key);
  if (!c) return;
  for (auto _ : state) {
    c->ops->attention_forward(c->out, c->lse, c->qkv, c->heads, Tensor{});
    c->ops->synchronize();
  }
  c->forward_done = true;
  state.counters["TFLOPS"] = benchmark::Counter(forward_flops(*c) / 1e12,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void attention_backward(benchmark::State& state, CaseKey key) {
  Case* c = the_case(state, key);
  if (!c) return;
  if (!c->forward_done) {
    c->ops->attention_forward(c->out, c->lse, c->qkv, c->heads, Tensor{});
    c->forward_done = true;
  }
  for (auto _ : state) {
    c->ops->attention_backward(c->dqkv, c->dout, c->qkv, c->out, c->lse, c->heads, Tensor{});
    c->ops->synchronize();
  }
  state.counters["TFLOPS"] = benchmark::Counter(2.5 * forward_flops(*c) / 1e12,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Each case's forward, then its backward, so that one set-up serves both.
void register_cases() {
  for (const bool cudnn : {false, true})
    for (const int head_dim : {64, 128})
      for (const int group : {1, 4}) {
        const CaseKey key{cudnn, head_dim, group};
        const std::string args = "/cudnn:" + std::to_string(cudnn ? 1 : 0) + "/head_dim:" +
                                 std::to_string(head_dim) + "/group:" + std::to_string(group);
        for (auto [name, body] : {std::pair{"BM_attention_forward", &attention_forward},
                                  std::pair{"BM_attention_backward", &attention_backward}})
          benchmark::RegisterBenchmark((name + args).c_str(), body, key)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
      }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_cases();
  benchmark::RunSpecifiedBenchmarks();
  current.reset();  // before the CUDA runtime unloads at exit
  benchmark::Shutdown();
  return 0;
}
