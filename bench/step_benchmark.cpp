// One full training step of a kiln config, timed with Google Benchmark: the trainer's
// step (trainer/train/step_runner.cpp) on seeded random tokens instead of a dataset, on the
// CPU or, with --set backend.device=cuda --set precision.dtype=bf16, on the GPU.
//
//   kiln_bench_step [--config FILE] [--set section.key=value ...] [--describe]
//                   [--products tuned|fused|plain]
//                   [--profile [--gemm-tflops X --bandwidth-gbs Y] [--profile-json FILE]]
//                   [--benchmark_* flags]
//
// One iteration = zero_grad; forward and backward over each of grad_accum() micro-batches
// through the pipeline executor's one-stage schedule, as the trainer runs one rank without
// pipelining (each backward weighted by loss scale / tokens per step); AdamW step with clipping (fp16:
// with dynamic loss scaling, as the trainer); then a wait for the device to finish. With
// train.cuda_graphs (on by default) on a GPU the timed iterations replay one CUDA graph of the
// whole step, as the trainer does (trainer/train/device_step.h); stderr says whether. Counters:
//   tok_per_s       tokens per second
//   tflops          model TFLOP/s (trainer/model/flops.h: 6 N + 12 L d s per token)
//   mfu, hfu        model and hardware FLOP/s over the device's dense BF16 peak, as
//                   fractions (only when the peak is known: H100, H200, A100)
//   fwd_ms, bwd_ms, opt_ms
//                   one step split into forward (with zero_grad and set_batch), backward and
//                   optimizer, from 5 separate steps with a device sync after each phase (op
//                   by op, with or without graphs)
//   peak_mem_bytes  everything kiln allocates: parameters, gradients, activations, scratch,
//                   op workspace and optimizer state, all laid out before step 1
//   device_mem_bytes  (GPU) device memory in use after the first step less before the model
//   init_s          seconds to lay out, allocate and initialise the model, before step 1
// --describe prints the resolved config, the model shape, the FLOP counts and the parameter
// list as JSON and exits: bench/torch_step.py and bench/peers/torch_gpu_step.py build their
// PyTorch peers from it.
// --products says how a linear layer's matrix products run (kernels/ops.h): `tuned`, as the
// trainer (fused epilogues, each product's algorithm chosen by timing in the warm-up step),
// `fused` (the epilogues, the library's first algorithm) or `plain` (separate bias, GELU and
// bias-gradient kernels and the first algorithm, as before either existed): the A/B of
// bench/gpu-queue.md, in one binary. Any but `tuned` is named in the benchmark's name;
// `tuned` with --set backend.tune_products=false is `fused`.
// --profile runs kProfiledSteps steps after the warm-up through kernels/profiled_ops.h, prints
// the per-op table of bench/step_profile.h (floors from the measured ceilings --gemm-tflops and
// --bandwidth-gbs, required on a GPU) and exits; --profile-json also writes it as JSON.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bench/step_profile.h"
#include "base/check.h"
#include "kernels/profiled_ops.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/parallel/layout.h"
#include "trainer/train/backend.h"
#include "trainer/train/cuda_graph_choice.h"
#include "trainer/train/device_step.h"
#include "trainer/train/pipeline_executor.h"
#include "trainer/model/flops.h"
#include "trainer/plan/rank_build.h"
#include "trainer/util/random.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Steps timed phase by phase for the forward/backward/optimizer split.
constexpr int kPhaseSteps = 5;
// Steps run through the profiler with --profile.
constexpr int kProfiledSteps = 3;

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  bool describe = false;
  bool profile = false;
  double gemm_tflops = 0, bandwidth_gbs = 0;
  std::string profile_json;
  std::string products = "tuned";
  std::vector<char*> rest;  // argv[0] and the flags left for Google Benchmark
};

double positive_number(const char* flag, const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(value) || value <= 0)
    throw kiln::Error(fmt::format("{} {}: not a positive number", flag, text));
  return value;
}

Args parse_args(int argc, char** argv) {
  Args args;
  args.rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    const auto is = [&](const char* flag) { return std::strcmp(argv[i], flag) == 0; };
    if ((is("--gemm-tflops") || is("--bandwidth-gbs") || is("--profile-json") ||
         is("--products")) &&
        !has_value)
      throw kiln::Error(fmt::format("{} needs a value", argv[i]));
    if (is("--config") && has_value) {
      args.config_path = argv[++i];
    } else if (is("--set") && has_value) {
      args.overrides.push_back(argv[++i]);
    } else if (is("--describe")) {
      args.describe = true;
    } else if (is("--profile")) {
      args.profile = true;
    } else if (is("--gemm-tflops")) {
      args.gemm_tflops = positive_number(argv[i], argv[i + 1]);
      ++i;
    } else if (is("--bandwidth-gbs")) {
      args.bandwidth_gbs = positive_number(argv[i], argv[i + 1]);
      ++i;
    } else if (is("--profile-json")) {
      args.profile_json = argv[++i];
    } else if (is("--products")) {
      args.products = argv[++i];
      if (args.products != "tuned" && args.products != "fused" && args.products != "plain")
        throw kiln::Error("--products " + args.products + ": tuned, fused or plain");
    } else {
      args.rest.push_back(argv[i]);
    }
  }
  const bool ceilings = args.gemm_tflops > 0 || args.bandwidth_gbs > 0;
  if ((ceilings || !args.profile_json.empty()) && !args.profile)
    throw kiln::Error("--gemm-tflops, --bandwidth-gbs and --profile-json go with --profile");
  if ((args.gemm_tflops > 0) != (args.bandwidth_gbs > 0))
    throw kiln::Error("--gemm-tflops and --bandwidth-gbs go together");
  return args;
}

// What the PyTorch peers need: the model in tests/parity/torch_reference.py's terms,
// the training settings, the thread count, the FLOP counts and every parameter
// (vocabulary padding left out).
json describe(const kiln::Config& config, const kiln::GptModel& model, const kiln::Ops& ops) {
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
            {"padded_vocab", m.padded_vocab()},
            {"seq_len", m.seq_len},
            {"rope_theta", m.rope_theta},
            {"norm_eps", m.norm_eps},
            {"init_std", m.init_std},
            {"tie_embeddings", m.tie_embeddings},
            // MoE layers: the reference runs Mixtral's (softmax, normalised top-k, dropless).
            {"num_experts", m.moe.num_experts},
            {"top_k", m.moe.top_k},
            {"expert_ffn", m.moe.enabled() ? m.expert_ffn_dim() : 0},
            // Latent attention (model.attention=mla): the reference's latent_attention.
            {"attention", m.attention},
            {"q_lora_rank", m.q_lora_rank},
            {"kv_lora_rank", m.kv_lora_rank},
            {"qk_nope_head_dim", m.qk_nope_head_dim},
            {"qk_rope_head_dim", m.qk_rope_head_dim},
            {"v_head_dim", m.v_head_dim}}},
          {"device", ops.name()},
          {"threads", kiln::resolved_threads(config.backend)},
          {"grad_accum", config.grad_accum()},
          {"model_flops_per_token", kiln::model_flops_per_token(m)},
          {"recomputed_flops_per_token", kiln::recomputed_flops_per_token(m)},
          {"peak_flops", kiln::peak_bf16_flops(ops.name())},
          {"params", params}};
}

struct PhaseTimes {  // seconds, summed over the steps timed
  double forward = 0, backward = 0, optimizer = 0;
};

int run(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  const kiln::Config config = kiln::load_config(args.config_path, args.overrides);
  const kiln::ModelConfig& m = config.model;
  const kiln::TrainConfig& t = config.train;
  auto ops = kiln::make_ops(config, 0);
  const kiln::DType dtype = kiln::compute_dtype(config.precision, ops->device());
  const bool gpu = ops->device() == kiln::Device::Cuda;
  const kiln::DeviceCeilings ceilings{args.gemm_tflops * 1e12, args.bandwidth_gbs * 1e9};
  if (args.profile && gpu && !ceilings.known())
    throw kiln::Error("--profile on a GPU needs --gemm-tflops and --bandwidth-gbs");
  if (args.describe) {
    // Parameter shapes do not depend on the batch: lay out one sequence, initialise nothing.
    const kiln::GptModel model(m, 1, *ops, dtype);
    fmt::print("{}\n", describe(config, model, *ops).dump(1));
    return 0;
  }
  std::ofstream json_file;  // opened first, so a bad path fails before the steps run
  if (!args.profile_json.empty()) {
    json_file.open(args.profile_json);
    if (!json_file) throw kiln::Error("cannot write " + args.profile_json);
  }
  // With --profile the model and optimizer run their ops through the profiler.
  const auto profiled = args.profile ? std::make_unique<kiln::ProfiledOps>(*ops) : nullptr;
  kiln::Ops& step_ops = profiled ? *profiled : *ops;
  const double free_before = gpu ? static_cast<double>(ops->available_memory()) : 0;
  const Clock::time_point setup = Clock::now();
  kiln::ModelSplit model_split;
  model_split.fp8 = kiln::fp8_recipe(config.precision);  // precision.dtype=fp8: FP8 linear products
  kiln::GptModel model(m, t.micro_batch, step_ops, dtype,
                       kiln::AdamW::state_bytes_per_element(dtype), 1, model_split);
  model.init_parameters(t.seed);
  ops->synchronize();
  const double init_s = std::chrono::duration<double>(Clock::now() - setup).count();
  kiln::AdamW optimizer(t, model.parameters(), step_ops);
  kiln::LossScaler scaler =
      config.precision.dtype == "fp16" ? kiln::LossScaler::dynamic() : kiln::LossScaler::none();

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

  // Waits for the device: copying one gradient element to the host synchronises the stream
  // (on the inner ops: no part of the profile).
  const kiln::Tensor one = model.parameters().flat_grads().slice(0, 1);
  auto sync = [&] {
    double host = 0;
    ops->copy_to_host(&host, one);
  };
  // The micro-batches go through the trainer's pipeline executor on the one-stage schedule,
  // as one rank without pipelining trains (trainer/train/step_runner.h).
  const std::unique_ptr<kiln::Communicator> one_stage = kiln::make_single_process_communicator();
  kiln::PipelineExecutor executor(model, *one_stage, kiln::PipelinePlacement{});
  const kiln::PipelineSchedule schedule = kiln::pipeline_schedule(1, 1, 0, accum);
  // One step; with `split`, a sync after each phase and its time added there (the batch's
  // loading counts as forward).
  auto step = [&](PhaseTimes* split) {
    const Clock::time_point start = Clock::now();
    const double scale = scaler.scale();
    model.zero_grad();
    double loss = 0;
    const kiln::PipelineTimes phases = executor.run(
        schedule, scale / tokens_per_step,
        [&](int micro, int slot) {
          model.set_batch(tokens[static_cast<size_t>(micro)].data(), targets[static_cast<size_t>(micro)].data(), B,
                          T, slot);
        },
        [&](int, int, double micro_loss) { loss += micro_loss / accum; },
        split ? std::function<void()>(sync) : nullptr);
    const Clock::time_point opt_start = Clock::now();
    scaler.update(optimizer.step(t.lr, scale).skipped);
    model.update_fp8_scales();
    sync();
    if (split) {
      split->forward += std::chrono::duration<double>(opt_start - start).count() - phases.bwd_ms / 1e3;
      split->backward += phases.bwd_ms / 1e3;
      split->optimizer += std::chrono::duration<double>(Clock::now() - opt_start).count();
    }
    return loss;
  };
  // The step replayed from one CUDA graph, where the run allows it (one rank here; no MoE,
  // not profiled); the phase split and the profile run op by op.
  const kiln::CudaGraphChoice graphs =
      kiln::choose_cuda_graphs(config, kiln::ParallelLayout(config.parallel, 1), step_ops.device(), "nccl");
  std::unique_ptr<kiln::DeviceStep> device_step;
  if (graphs.use && !profiled)
    device_step = std::make_unique<kiln::DeviceStep>(model, optimizer, step_ops, accum, kiln::DocumentOptions{});
  fmt::print(stderr, "kiln_bench_step: CUDA graphs: {}\n",
             device_step ? "the timed steps replay one capture of the whole step"
                         : "not used (" + (profiled ? std::string("--profile times every op") : graphs.why_not) + ")");
  auto replayed_step = [&]() -> double {
    if (device_step) {
      for (int micro = 0; micro < accum; ++micro)
        device_step->stage(micro, tokens[static_cast<size_t>(micro)].data(), targets[static_cast<size_t>(micro)].data(),
                           {});
      const double scale = scaler.scale();
      if (const auto result = device_step->run(t.lr, scale, scale / tokens_per_step, /*captured=*/true)) {
        scaler.update(result->update.skipped);
        model.update_fp8_scales();
        return result->nats / tokens_per_step;  // every target of the benchmark is trained
      }
      fmt::print(stderr, "kiln_bench_step: CUDA graphs: off: the step cannot be captured ({})\n",
                 device_step->why_not());
      device_step.reset();
    }
    return step(nullptr);
  };
  // Warm-up: first touch of every buffer, library and thread start-up, as many steps as the
  // trainer takes before it captures; in the first, as in the trainer's, each product's
  // algorithm chosen by timing (stderr says how long: stdout may be JSON).
  ops->fuse_products(args.products != "plain");
  ops->tune_products(args.products == "tuned" && config.backend.tune_products);
  step(nullptr);
  ops->tune_products(false);
  if (const std::string tuning = ops->product_tuning(); !tuning.empty())
    fmt::print(stderr, "kiln_bench_step: matrix products: {}\n", tuning);
  for (int i = 1; i < kiln::kGraphWarmupSteps; ++i) step(nullptr);
  const std::string name =
      fmt::format("kiln_step/{}/{}/L{}_C{}_T{}_B{}x{}{}", m.arch, config.precision.dtype,
                  m.n_layer, m.d_model, T, B, accum,
                  args.products == "tuned" ? "" : "/products=" + args.products);
  if (profiled) {
    profiled->reset();
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kProfiledSteps; ++i) step(nullptr);
    const kiln::StepProfile profile{
        name + " on " + ops->name(), gpu ? 0 : kiln::resolved_threads(config.backend), kProfiledSteps,
        std::chrono::duration<double>(Clock::now() - start).count(), profiled->report()};
    fmt::print("{}", kiln::profile_table(profile, ceilings));
    if (json_file.is_open()) json_file << kiln::profile_json(profile, ceilings).dump(1) << "\n";
    return 0;
  }
  const double device_mem = gpu ? free_before - static_cast<double>(ops->available_memory()) : 0;
  PhaseTimes split;
  // The loss after a fixed count of steps from the seed, before the timed steps (whose count
  // varies): two precisions compare their curves by it.
  double loss = 0;
  for (int i = 0; i < kPhaseSteps; ++i) loss = step(&split);
  replayed_step();  // the capture, when there is one, before the timed steps

  double arenas = static_cast<double>(optimizer.bytes());
  for (const kiln::ArenaSize& a : model.memory()) arenas += static_cast<double>(a.bytes);
  const int64_t model_flops = kiln::model_flops_per_token(m);
  const int64_t hardware_flops = model_flops + kiln::recomputed_flops_per_token(m);
  const double peak = kiln::peak_bf16_flops(ops->name());

  benchmark::RegisterBenchmark(name.c_str(), [&](benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(replayed_step());
    using benchmark::Counter;
    const auto rate = [&](double per_token) {
      return Counter(tokens_per_step * per_token, Counter::kIsIterationInvariantRate);
    };
    state.counters["tok_per_s"] = rate(1);
    state.counters["tflops"] = rate(static_cast<double>(model_flops) / 1e12);
    if (peak > 0) {
      state.counters["mfu"] = rate(static_cast<double>(model_flops) / peak);
      state.counters["hfu"] = rate(static_cast<double>(hardware_flops) / peak);
    }
    state.counters["fwd_ms"] = split.forward * 1e3 / kPhaseSteps;
    state.counters["bwd_ms"] = split.backward * 1e3 / kPhaseSteps;
    state.counters["opt_ms"] = split.optimizer * 1e3 / kPhaseSteps;
    state.counters["peak_mem_bytes"] = Counter(arenas, Counter::kDefaults, Counter::kIs1024);
    state.counters["init_s"] = init_s;
    state.counters["loss"] = loss;
    if (gpu) {
      state.counters["device_mem_bytes"] =
          Counter(device_mem, Counter::kDefaults, Counter::kIs1024);
    }
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
