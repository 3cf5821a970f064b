// kiln plan: the layout planner's table (trainer/plan/planner.h), or its JSON.
#include "cli/plan_command.h"

#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/check.h"
#include "store/human_format.h"
#include "trainer/plan/planner.h"

namespace kiln {
namespace {

struct PlanOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  int gpus = 1;
  std::string gpu = "h100";
  int nodes = 0;
  std::string profile;
  int top = 10;
  bool json = false;
  bool this_layout = false;
};

nlohmann::json to_json(const PlannedLayout& l) {
  const StepPrediction& t = l.time;
  nlohmann::json j = {
      {"layout", l.name},
      {"parallel", {{"tp", l.config.parallel.tp}, {"cp", l.config.parallel.cp}, {"pp", l.config.parallel.pp},
                    {"vpp", l.config.parallel.vpp}, {"ep", l.config.parallel.ep},
                    {"sequence_parallel", l.config.parallel.sequence_parallel},
                    {"distributed_optimizer", l.config.parallel.distributed_optimizer}}},
      {"micro_batch", l.config.train.micro_batch},
      {"recompute", l.config.train.recompute},
      {"step_s", t.step_s},
      {"split_s", {{"compute", t.compute_s}, {"tensor", t.tensor_s}, {"context", t.context_s}, {"expert", t.expert_s},
                   {"pipeline", t.pipeline_s}, {"data", t.data_s}, {"optimizer", t.optimizer_s}}},
      {"tokens_per_s", t.tokens_per_s},
      {"mfu", t.mfu}};
  if (l.sized) {
    nlohmann::json arenas = nlohmann::json::object();
    for (const ArenaSize& a : l.memory.arenas) arenas[a.name] = a.bytes;
    j["memory"] = {{"rank", l.memory_rank}, {"total_bytes", l.memory.total()}, {"arenas", arenas}};
  }
  if (!l.refused.empty()) j["refused"] = l.refused;
  return j;
}

std::string row(int rank, const PlannedLayout& l) {
  const StepPrediction& t = l.time;
  const RankMemory& m = l.memory;
  const size_t other = m.total() - m.bytes("parameters") - m.bytes("gradients") - m.bytes("optimizer") -
                       m.bytes("activations");
  const auto ms = [](double s) { return fmt::format("{:.1f}", s * 1e3); };
  return fmt::format("| {} | {} | {} | {} / {} / {} / {} / {} | {} | {} / {} / {} / {} / {} / {} / {} | {:.0f} | {} |",
                     rank, l.name, human_bytes(m.total()), human_bytes(m.bytes("parameters")),
                     human_bytes(m.bytes("gradients")), human_bytes(m.bytes("optimizer")),
                     human_bytes(m.bytes("activations")), human_bytes(other), ms(t.step_s), ms(t.compute_s),
                     ms(t.tensor_s), ms(t.context_s), ms(t.expert_s), ms(t.pipeline_s), ms(t.data_s),
                     ms(t.optimizer_s), t.tokens_per_s, t.mfu > 0 ? fmt::format("{:.1f}%", 100 * t.mfu) : "-");
}

void run_plan(const PlanOptions& o) {
  PlanRequest request;
  request.config = load_config(o.config_path, o.overrides);
  request.devices = o.gpus;
  request.device = device_spec(o.gpu);
  if (!o.profile.empty()) request.device = with_profile(request.device, o.profile);
  request.nodes = o.nodes;
  request.top = o.top;
  request.search = !o.this_layout;
  const Plan plan = make_plan(request);
  if (o.json) {
    nlohmann::json j = {{"device", request.device.description},
                        {"devices", o.gpus},
                        {"nodes", plan.nodes},
                        {"candidates", plan.candidates},
                        {"not_dividing", plan.not_dividing},
                        {"not_sized", plan.not_sized},
                        {"layouts", nlohmann::json::array()},
                        {"too_big", nlohmann::json::array()}};
    for (const PlannedLayout& l : plan.fitting) j["layouts"].push_back(to_json(l));
    for (const PlannedLayout& l : plan.too_big) j["too_big"].push_back(to_json(l));
    j["divide_reasons"] = plan.divide_reasons;
    fmt::print("{}\n", j.dump(1));
    return;
  }
  const ModelConfig& m = request.config.model;
  fmt::print("kiln plan: {} layers, d_model {}, seq {}, global batch {}, {} on {} x {} ({} node{} of {})\n",
             m.n_layer, m.d_model, m.seq_len, request.config.train.global_batch, request.config.precision.dtype,
             o.gpus, request.device.description, plan.nodes, plan.nodes == 1 ? "" : "s", plan.ranks_per_node);
  fmt::print("{} layouts considered: {} fit and are shown, {} do not fit, {} do not divide, {} predicted slower "
             "were not sized\n\n",
             plan.candidates, plan.fitting.size(), plan.too_big.size(), plan.not_dividing, plan.not_sized);
  if (!plan.fitting.empty()) {
    fmt::print("| # | layout | memory a GPU | params / grads / optim / activ / other | step ms | compute / tp / cp / "
               "ep / pp / dp / optim ms | tokens/s | MFU |\n");
    fmt::print("| ---: | --- | ---: | --- | ---: | --- | ---: | ---: |\n");
    for (size_t i = 0; i < plan.fitting.size(); ++i) fmt::print("{}\n", row(static_cast<int>(i) + 1, plan.fitting[i]));
  }
  if (!plan.too_big.empty()) {
    fmt::print("\nfaster, but over {}'s memory:\n", request.device.name);
    for (size_t i = 0; i < plan.too_big.size() && i < 5; ++i)
      fmt::print("  {} ({:.1f} ms): {}\n", plan.too_big[i].name, plan.too_big[i].time.step_s * 1e3,
                 plan.too_big[i].refused);
    if (plan.too_big.size() > 5) fmt::print("  and {} more\n", plan.too_big.size() - 5);
  }
  for (const std::string& why : plan.divide_reasons) fmt::print("does not divide, e.g.: {}\n", why);
  if (plan.fitting.empty() && plan.too_big.empty())
    fail(fmt::format("plan: no layout divides {} devices: every candidate was refused by the split's arithmetic "
                     "(above); a larger train.global_batch or another --gpus may divide",
                     o.gpus));
  if (plan.fitting.empty())
    fail(fmt::format("plan: no layout fits {} x {}: the smallest needs more than its {}", o.gpus, request.device.name,
                     human_bytes(static_cast<size_t>(request.device.memory_bytes))));
  fmt::print("\nrun the first: kiln train ... --set parallel.tp={} --set parallel.cp={} --set parallel.pp={} "
             "--set parallel.vpp={}{} --set train.micro_batch={} --set train.recompute={}{}\n",
             plan.fitting[0].config.parallel.tp, plan.fitting[0].config.parallel.cp, plan.fitting[0].config.parallel.pp,
             plan.fitting[0].config.parallel.vpp,
             plan.fitting[0].config.parallel.ep > 1 ? fmt::format(" --set parallel.ep={}", plan.fitting[0].config.parallel.ep) : "",
             plan.fitting[0].config.train.micro_batch, plan.fitting[0].config.train.recompute,
             std::string(plan.fitting[0].config.parallel.sequence_parallel ? " --set parallel.sequence_parallel=true" : "") +
                 (plan.fitting[0].config.parallel.distributed_optimizer ? " --set parallel.distributed_optimizer=true" : ""));
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Rank every parallel layout of a config on N GPUs by predicted step time, with each rank's memory");
  cmd->add_option("-c,--config", o->config_path, "JSON run config (default: the tiny demo config)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides, "Override a config key: section.key=value")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--gpus", o->gpus, "Devices (ranks) to plan for")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--gpu", o->gpu, "Device: h100, h200, a100, a100-40gb, or cpu (this machine's cores)")
      ->capture_default_str();
  cmd->add_option("--nodes", o->nodes, "Nodes the devices spread over (default: as few as hold them)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--profile", o->profile,
                  "A kiln_bench_step --profile-json file: the device's product, attention and memory rates from it")
      ->check(CLI::ExistingFile);
  cmd->add_option("--top", o->top, "Fitting layouts to show (0: size and show every one)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the plan as JSON");
  cmd->add_flag("--this-layout", o->this_layout,
                "Predict the config's own layout (its parallel section, micro-batch and recompute) instead of searching");
  cmd->callback([o] { run_plan(*o); });
}

}  // namespace kiln
