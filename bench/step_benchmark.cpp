// One full training step of a kiln config, timed with Google Benchmark: the trainer's
// step (trainer/train/trainer.cpp) on seeded random tokens instead of a dataset.
//
//   kiln_bench_step [--config FILE] [--set section.key=value ...] [--describe]
//                   [--benchmark_* flags]
//
// One iteration = zero_grad; forward and backward over each of grad_accum() micro-batches
// (each backward weighted by 1 / tokens per step); AdamW step with clipping. Reports
// tokens/s (counter "tok_per_s") and wall time per step. --describe prints the resolved
// config, the model shape and the parameter list as JSON and exits: bench/torch_step.py
// builds its PyTorch peer from it.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kernels/check.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/train/backend.h"
#include "trainer/util/random.h"

namespace {

using nlohmann::json;

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  bool describe = false;
  std::vector<char*> rest;  // argv[0] and the flags left for Google Benchmark
};

Args parse_args(int argc, char** argv) {
  Args args;
  args.rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--config") == 0 && has_value) {
      args.config_path = argv[++i];
    } else if (std::strcmp(argv[i], "--set") == 0 && has_value) {
      args.overrides.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--describe") == 0) {
      args.describe = true;
    } else {
      args.rest.push_back(argv[i]);
    }
  }
  return args;
}

// What the PyTorch peer needs: the model in tests/parity/torch_reference.py's terms,
// the training settings, the thread count and every parameter (vocabulary padding left out).
json describe(const kiln::Config& config, const kiln::GptModel& model) {
  const kiln::ModelConfig& m = config.model;
  json params = json::array();
  for (const kiln::Parameter& p : model.parameters().all()) {
    std::vector<int64_t> shape(p.value.shape.dims.begin(),
                               p.value.shape.dims.begin() + p.value.shape.rank);
    shape[0] = p.real_rows;
    const char* init = p.init == kiln::Init::Normal ? "normal"
                       : p.init == kiln::Init::Ones ? "ones"
                                                    : "zeros";
    params.push_back(
        {{"name", p.name}, {"shape", shape}, {"decay", p.decay}, {"init", init}, {"std", p.std}});
  }
  return {{"config", kiln::config_to_json(config)},
          {"model",
           {{"arch", m.arch},
            {"n_layer", m.n_layer},
            {"d_model", m.d_model},
            {"n_head", m.n_head},
            {"n_kv_head", m.kv_heads()},
            {"head_dim", m.head_dim()},
            {"d_ff", m.ffn_dim()},
            {"vocab_size", m.vocab_size},
            {"seq_len", m.seq_len},
            {"rope_theta", m.rope_theta},
            {"norm_eps", m.norm_eps},
            {"tie_embeddings", m.tie_embeddings}}},
          {"threads", kiln::resolved_threads(config.backend)},
          {"grad_accum", config.grad_accum()},
          {"params", params}};
}

int run(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  const kiln::Config config = kiln::load_config(args.config_path, args.overrides);
  const kiln::ModelConfig& m = config.model;
  const kiln::TrainConfig& t = config.train;

  auto ops = kiln::make_ops(config);
  kiln::GptModel model(m, t.micro_batch, *ops);
  model.init_parameters(t.seed);
  if (args.describe) {
    fmt::print("{}\n", describe(config, model).dump(1));
    return 0;
  }
  kiln::AdamW optimizer(t, model.parameters(), *ops);

  // Seeded random tokens and targets, one micro-batch each.
  const int accum = config.grad_accum();
  const int64_t B = t.micro_batch, T = m.seq_len;
  const double tokens_per_step = static_cast<double>(t.global_batch) * static_cast<double>(T);
  kiln::Random rng(t.seed);
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(accum)), targets = tokens;
  for (int micro = 0; micro < accum; ++micro)
    for (auto* v : {&tokens[static_cast<size_t>(micro)], &targets[static_cast<size_t>(micro)]})
      for (int64_t i = 0; i < B * T; ++i)
        v->push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(m.vocab_size))));

  auto step = [&] {
    model.zero_grad();
    double loss = 0;
    for (int micro = 0; micro < accum; ++micro) {
      model.set_batch(tokens[static_cast<size_t>(micro)].data(),
                      targets[static_cast<size_t>(micro)].data(), B, T);
      loss += model.forward() / accum;
      model.backward(1.0 / tokens_per_step);
    }
    optimizer.step(t.lr);
    return loss;
  };
  step();  // warm-up: first touch of every buffer, BLAS and OpenMP start-up

  const std::string name = fmt::format(
      "kiln_step/{}/L{}_C{}_T{}_B{}x{}", m.arch, m.n_layer, m.d_model, T, B, accum);
  benchmark::RegisterBenchmark(name.c_str(),
                               [&](benchmark::State& state) {
                                 for (auto _ : state) benchmark::DoNotOptimize(step());
                                 state.counters["tok_per_s"] = benchmark::Counter(
                                     tokens_per_step, benchmark::Counter::kIsIterationInvariantRate);
                                 state.SetLabel(ops->name());
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);

  int rest_argc = static_cast<int>(args.rest.size());
  benchmark::Initialize(&rest_argc, args.rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, args.rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln_bench_step: %s\n", e.what());
    return 1;
  }
}
