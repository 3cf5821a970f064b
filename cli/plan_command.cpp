// kiln plan: the layout planner's table (trainer/plan/planner.h), or its JSON.
#include "cli/plan_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/check.h"
#include "cli/next_steps.h"
#include "cli/runs_format.h"
#include "base/human_format.h"
#include "cli/runs_store.h"
#include "store/run_queries.h"
#include "trainer/parallel/pipeline_picture.h"
#include "trainer/plan/checkpoint_interval.h"
#include "trainer/plan/planner.h"
#include "trainer/plan/rank_build.h"

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
  bool wide = false;
  bool this_layout = false;
  bool timeline = false;
  // The checkpoint interval's inputs (docs/resilience.md#how-often-to-checkpoint): the failure
  // rate, and a checkpoint's cost given or measured from a run in the store.
  double mtbf_hours = 0;
  double checkpoint_s = 0;
  std::string checkpoint_of;
  std::string store;
};

// The median stall of the run's recorded checkpoints, in seconds: the cost --checkpoint-of
// measures. A run with none measured is an error saying so.
double measured_checkpoint_s(const PlanOptions& o) {
  auto db = open_store_for_reading(o.store);
  const int64_t id = store::resolve_run(*db, o.checkpoint_of);
  std::vector<double> seconds;
  for (const store::Checkpoint& c : store::list_checkpoints(*db, id))
    if (c.seconds) seconds.push_back(*c.seconds);
  if (seconds.empty())
    fail(fmt::format("--checkpoint-of {}: the run has no checkpoint whose cost was measured (kiln records it since "
                     "store schema 12); give --checkpoint-s SECONDS",
                     o.checkpoint_of));
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// The Young/Daly interval for the first layout's step, as the plan says it.
void print_checkpoint_interval(const PlanOptions& o, const PlannedLayout& first, double checkpoint_s) {
  const CheckpointInterval c = checkpoint_interval(checkpoint_s, o.mtbf_hours * 3600, first.time.step_s);
  const std::string measured = o.checkpoint_of.empty() ? std::string() : " (measured on " + o.checkpoint_of + ")";
  fmt::print("\ncheckpoints: every {} steps ({}) by the Young/Daly rule, for a checkpoint of {:.1f} s{} and a failure "
             "every {:g} h:\n  expected goodput {:.1f}% ({:.1f}% writing checkpoints, {:.1f}% lost to failures; "
             "restarts' start-up not counted)\n  --set train.checkpoint_interval={}\n",
             c.steps, human_duration(c.interval_s), checkpoint_s, measured, o.mtbf_hours, c.goodput * 100,
             c.checkpoint_share * 100, c.lost_share * 100, c.steps);
}

nlohmann::json to_json(const PlannedLayout& l) {
  const StepPrediction& t = l.time;
  nlohmann::json j = {
      {"layout", l.name},
      {"parallel", {{"tp", l.config.parallel.tp}, {"cp", l.config.parallel.cp}, {"pp", l.config.parallel.pp},
                    {"vpp", l.config.parallel.vpp}, {"schedule", l.config.parallel.schedule}, {"ep", l.config.parallel.ep},
                    {"sequence_parallel", l.config.parallel.sequence_parallel},
                    {"shard", shard_name(shard_level(l.config.parallel))}}},
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

// The plan's layouts, fastest first: one line each, within 120 columns; --wide adds each
// arena's bytes and each part of the step's time.
void print_layouts(const std::vector<PlannedLayout>& layouts, bool wide) {
  using A = Table::Align;
  std::vector<Table::Column> columns = {{"#", A::Right}, {"layout", A::Left}, {"memory a rank", A::Right}};
  const std::vector<std::string> arenas = {"parameters", "gradients", "optimizer", "activations"};
  if (wide)
    for (const char* part : {"params", "grads", "optim", "activ", "other"}) columns.push_back({part, A::Right});
  columns.push_back({"step ms", A::Right});
  if (wide)
    for (const char* part : {"compute", "tp", "cp", "ep", "pp", "dp", "optim ms"}) columns.push_back({part, A::Right});
  for (const char* last : {"tokens/s", "MFU"}) columns.push_back({last, A::Right});
  Table table(columns);
  const auto ms = [](double s) { return fmt::format("{:.1f}", s * 1e3); };
  for (size_t i = 0; i < layouts.size(); ++i) {
    const PlannedLayout& l = layouts[i];
    const StepPrediction& t = l.time;
    const RankMemory& m = l.memory;
    std::vector<std::string> cells = {std::to_string(i + 1), l.name, human_bytes(m.total())};
    if (wide) {
      size_t other = m.total();
      for (const std::string& arena : arenas) {
        cells.push_back(human_bytes(m.bytes(arena)));
        other -= m.bytes(arena);
      }
      cells.push_back(human_bytes(other));
    }
    cells.push_back(ms(t.step_s));
    if (wide)
      for (double part : {t.compute_s, t.tensor_s, t.context_s, t.expert_s, t.pipeline_s, t.data_s, t.optimizer_s})
        cells.push_back(ms(part));
    cells.push_back(fmt::format("{:.0f}", t.tokens_per_s));
    cells.push_back(t.mfu > 0 ? fmt::format("{:.1f}%", 100 * t.mfu) : "-");
    table.add(std::move(cells));
  }
  table.print(stdout);
}

// The --set assignments that turn `from` into `to`: each key whose value differs.
std::vector<std::string> changed_settings(const Config& from, const Config& to) {
  const nlohmann::json before = config_to_json(from), after = config_to_json(to);
  std::vector<std::string> sets;
  for (const auto& [section, keys] : after.items())
    for (const auto& [key, value] : keys.items())
      if (before.value(nlohmann::json::json_pointer("/" + section + "/" + key), nlohmann::json()) != value)
        sets.push_back(section + "." + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
  return sets;
}

// The command that trains the first layout as printed: this command's config and --set
// options (less the keys the layout sets), then the layout's own settings, under
// `kiln train --ranks N` for more than one rank on one machine, and for several machines
// under mpirun with a hostfile `hosts` that lists them (docs/parallelism.md).
std::string first_layout_command(const PlanOptions& o, const Plan& plan, const Config& config,
                                 const PlannedLayout& first) {
  const std::vector<std::string> layout = changed_settings(config, first.config);
  const auto key_of = [](const std::string& assignment) { return assignment.substr(0, assignment.find('=')); };
  std::string command = "kiln train";
  if (plan.nodes > 1)
    command = fmt::format("mpirun -np {} --hostfile hosts --map-by ppr:{}:node kiln train", o.gpus, plan.ranks_per_node);
  else if (o.gpus > 1)
    command += fmt::format(" --ranks {}", o.gpus);
  if (!o.config_path.empty()) command += " --config " + shell_quote(o.config_path);
  for (const std::string& set : o.overrides) {
    const bool replaced = std::any_of(layout.begin(), layout.end(),
                                      [&](const std::string& l) { return key_of(l) == key_of(set); });
    if (!replaced) command += " --set " + shell_quote(set);
  }
  for (const std::string& set : layout) command += " --set " + shell_quote(set);
  return command;
}

void run_plan(const PlanOptions& o) {
  if (o.mtbf_hours > 0 && o.checkpoint_s <= 0 && o.checkpoint_of.empty())
    fail("--mtbf-hours needs a checkpoint's cost: --checkpoint-s SECONDS, or --checkpoint-of RUN to measure it");
  PlanRequest request;
  request.config = load_config(o.config_path, o.overrides);
  request.devices = o.gpus;
  request.device = device_spec(o.gpu);
  if (!o.profile.empty()) request.device = with_profile(request.device, o.profile);
  request.nodes = o.nodes;
  request.top = o.top;
  request.search = !o.this_layout && !o.timeline;
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
  fmt::print("kiln plan: {} layers, d_model {}, seq {}, global batch {}, {}\non {} x {} ({} node{} of {})\n",
             m.n_layer, m.d_model, m.seq_len, request.config.train.global_batch, request.config.precision.dtype,
             o.gpus, request.device.description, plan.nodes, plan.nodes == 1 ? "" : "s", plan.ranks_per_node);
  fmt::print("{} layouts considered: {} fit and are shown, {} do not fit, {} do not divide, {} predicted slower "
             "were not sized\n\n",
             plan.candidates, plan.fitting.size(), plan.too_big.size(), plan.not_dividing, plan.not_sized);
  if (!plan.fitting.empty()) print_layouts(plan.fitting, o.wide);
  if (!plan.too_big.empty()) {
    fmt::print("\nfaster, but over {}'s memory:\n", request.device.name);
    for (size_t i = 0; i < plan.too_big.size() && i < 5; ++i)
      fmt::print("  {} ({:.1f} ms): {}\n", plan.too_big[i].name, plan.too_big[i].time.step_s * 1e3,
                 plan.too_big[i].refused);
    if (plan.too_big.size() > 5) fmt::print("  and {} more\n", plan.too_big.size() - 5);
  }
  for (const std::string& why : plan.divide_reasons) fmt::print("does not divide, e.g.: {}\n", why);
  if (o.timeline && plan.not_dividing == 0) {
    const ParallelLayout layout = parallel_layout(request.config, o.gpus);
    fmt::print("\n{} schedule over {} micro-batches:\n{}", request.config.parallel.schedule,
               micro_batches_per_step(request.config, layout),
               draw_pipeline(pipeline_schedules(request.config, layout), pipeline_placement(request.config, layout),
                             micro_batches_per_step(request.config, layout)));
  }
  if (plan.fitting.empty() && plan.too_big.empty())
    fail(fmt::format("plan: no layout divides {} devices: every candidate was refused by the split's arithmetic "
                     "(above); a larger train.global_batch or another --gpus may divide",
                     o.gpus));
  if (plan.fitting.empty())
    fail(fmt::format("plan: no layout fits {} x {}: the smallest needs more than its {}", o.gpus, request.device.name,
                     human_bytes(static_cast<size_t>(request.device.memory_bytes))));
  fmt::print("\nrun the first:\n  {}\n", first_layout_command(o, plan, request.config, plan.fitting[0]));
  if (o.mtbf_hours > 0)
    print_checkpoint_interval(o, plan.fitting[0], o.checkpoint_of.empty() ? o.checkpoint_s : measured_checkpoint_s(o));
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
  CLI::Option* mtbf = cmd->add_option("--mtbf-hours", o->mtbf_hours,
                                      "Hours between failures of the whole job: suggest a checkpoint interval for it "
                                      "(Young/Daly; docs/resilience.md)")
                          ->check(CLI::PositiveNumber);
  CLI::Option* cost = cmd->add_option("--checkpoint-s", o->checkpoint_s, "With --mtbf-hours: a checkpoint's cost, seconds")
                          ->check(CLI::PositiveNumber)
                          ->needs(mtbf);
  CLI::Option* of = cmd->add_option("--checkpoint-of", o->checkpoint_of,
                                    "With --mtbf-hours: measure a checkpoint's cost on this run of the store")
                        ->needs(mtbf)
                        ->excludes(cost);
  cmd->add_option("--store", o->store, "Run store file for --checkpoint-of (default: $KILN_STORE, else ./kiln-runs.db)")
      ->needs(of);
  cmd->add_flag("--json", o->json, "Print the plan as JSON")->excludes(mtbf);
  cmd->add_flag("--wide", o->wide, "Show each rank's memory by arena and the step's time by part");
  cmd->add_flag("--this-layout", o->this_layout,
                "Predict the config's own layout (its parallel section, micro-batch and recompute) instead of searching");
  cmd->add_flag("--timeline", o->timeline,
                "With the config's own layout (as --this-layout): draw its pipeline schedule's step, rank by rank")
      ->excludes("--json");
  cmd->callback([o] { run_plan(*o); });
}

}  // namespace kiln
