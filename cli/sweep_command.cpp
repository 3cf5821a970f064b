// kiln sweep: one base config trained at many settings, each point a `kiln train` run tagged
// with the sweep and recorded as its point (docs/sweeps.md).
#include "cli/sweep_command.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/private_files.h"
#include "base/run_names.h"
#include "cli/store_path.h"
#include "launch/sweep_run.h"
#include "launch/train_command.h"
#include "monitor/format/figures.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "store/sweep_queries.h"
#include "store/sweep_writer.h"
#include "store/user_text.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/durable_file.h"
#include "trainer/config/config.h"
#include "trainer/config/sweep_grid.h"
#include "trainer/parallel/gpu_placement.h"
#include "trainer/train/backend.h"
#include "trainer/train/run_recorder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using launch::SweepSlots;
using launch::SweepTask;

static_assert(kMaxSweepPoints == store::kMaxSweepPoints);

struct SweepOptions {
  std::string config_path;
  std::vector<std::string> grid;
  int64_t random = 0;
  std::optional<uint64_t> seed;
  int parallel = 1;
  int ranks = 1;
  std::string name;
  std::vector<std::string> overrides;
  std::vector<std::string> tags;
  std::string store;
  std::string resume;
  bool retry_failed = false;
  bool parallel_given = false;
};

// What every point shares, from the spec a new sweep records or a resumed one reads back.
struct SweepPlan {
  int64_t id = 0;
  std::string name;
  std::string store_path;
  nlohmann::json base_config;  // the config file's JSON with the sweep's --set applied
  std::vector<std::string> tags;
  int parallel = 1;
  int ranks = 1;
  std::string folder;       // train.checkpoint_dir/NAME: the frozen base config and the logs
  std::string base_file;    // the base config every point's run reads
};

std::string absolute(const std::string& path) { return fs::absolute(path).lexically_normal().string(); }

// "lr-sweep-03": the point's run, numbered to the width of the sweep's last point.
std::string point_run_name(const std::string& sweep, int64_t point, int64_t points) {
  const size_t width = std::to_string(std::max<int64_t>(points - 1, 0)).size();
  return fmt::format("{}-{:0{}}", sweep, point, width);
}

// A recorded point's parameters back as --set arguments: a string as its text, anything else
// as JSON (a number reads back as the same double).
std::vector<std::string> params_overrides(const nlohmann::ordered_json& params) {
  std::vector<std::string> overrides;
  for (const auto& [key, value] : params.items())
    overrides.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
  return overrides;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) {
    if (!text.empty()) text += ' ';
    text += w;
  }
  return text;
}

// The point's config, or the one line that says which point and key are wrong.
Config point_config(const nlohmann::json& base, const std::vector<std::string>& overrides, int64_t point) {
  try {
    return config_with_overrides(base, overrides);
  } catch (const Error& e) {
    fail(fmt::format("sweep: point {} ({}): {}", point, joined(overrides), e.what()));
  }
}

std::vector<SweepPoint> sweep_points(const SweepOptions& options) {
  std::vector<SweepAxis> axes;
  for (const std::string& text : options.grid) axes.push_back(parse_sweep_axis(text));
  if (options.random > 0) return random_points(axes, options.random, *options.seed);
  return grid_points(axes);
}

// Every point's run takes its config, alert hook included, from base.json: it is the user's
// alone (0600 in a folder of theirs) and replaces whatever is at its name, a planted link too,
// never writing through it.
void write_base_config(const SweepPlan& plan) {
  make_private_folder(plan.folder);
  write_file_atomically(plan.base_file, plan.base_config.dump(2) + "\n", FileAccess::OwnerOnly);
}

// The folder beside the runs' checkpoint folders that holds the sweep's base config and logs.
void place_folder(SweepPlan& plan) {
  const Config base = config_from_json(plan.base_config);
  plan.folder = absolute(run_checkpoint_root(base.train.checkpoint_dir, plan.name));
  plan.base_file = plan.folder + "/base.json";
}

SweepSlots slots_for(const SweepPlan& plan) {
  SweepSlots slots{plan.parallel, plan.ranks, {}};
  if (uses_gpu(config_from_json(plan.base_config).backend))
    slots.devices = launch::split_devices(visible_gpus(), plan.parallel);
  return slots;
}

SweepTask fresh_task(const SweepPlan& plan, int64_t point, const std::string& run_name,
                     const std::vector<std::string>& overrides) {
  SweepTask task{point, run_name, joined(overrides), {"--config", plan.base_file}, plan.folder + "/" + run_name + ".log"};
  for (const std::string& o : overrides) task.train_args.insert(task.train_args.end(), {"--set", o});
  task.train_args.insert(task.train_args.end(), {"--name", run_name, "--tag", plan.name});
  for (const std::string& tag : plan.tags) task.train_args.insert(task.train_args.end(), {"--tag", tag});
  task.train_args.insert(task.train_args.end(),
                         {"--store", plan.store_path, "--sweep-point", fmt::format("{}:{}", plan.id, point)});
  return task;
}

// Runs the tasks (launch/sweep_run.h), saying as each point launches and how each ended, then
// the points table.
void launch_points(const SweepPlan& plan, const std::vector<SweepTask>& tasks, const SweepSlots& slots,
                   const std::string& kiln, int64_t points) {
  auto db = store::open_store(plan.store_path, store::Access::ReadWrite);
  launch::SweepListener listener;
  listener.launching = [&](const SweepTask& task) {
    fmt::print("sweep {}: launch point {}/{} {}: {}\n", plan.name, task.point, points, task.run_name, task.params);
    std::fflush(stdout);
  };
  listener.finished = [&](const launch::PointEnd& end) {
    std::string result = fmt::format("exit {}, log {}", end.exit_status, end.task.log_path);
    if (end.run) {
      result = fmt::format("{}, loss {}", store::to_string(end.run->run.status), fixed4(end.run->loss));
      if (end.run->run.status != store::RunStatus::Completed) result += ", log " + end.task.log_path;
    }
    fmt::print("sweep {}: finish point {}/{} {}: {} ({:.1f} s into the sweep)\n", plan.name, end.task.point, points,
               end.task.run_name, result, end.seconds);
    std::fflush(stdout);
  };
  const launch::SweepResult result = launch::run_sweep(kiln, *db, plan.id, tasks, slots, listener);
  fmt::print("\n");
  print_sweep_points(*db, plan.id);
  if (result.interrupted) {
    fmt::print("sweep {}: interrupted; continue it with: kiln sweep --resume {} --store {}\n", plan.name, plan.name,
               plan.store_path);
    throw CLI::RuntimeError(130);
  }
  if (result.failures > 0)
    fail(fmt::format("sweep {}: {} of {} launched points did not complete; their logs are in {} (kiln sweep --resume {} "
                     "continues them)",
                     plan.name, result.failures, tasks.size(), plan.folder, plan.name));
}

nlohmann::json spec_of(const SweepOptions& options, const nlohmann::json& base_config) {
  return {{"config_path", options.config_path.empty() ? "" : absolute(options.config_path)},
          {"base_config", base_config},
          {"overrides", options.overrides},
          {"grid", options.grid},
          {"random", options.random > 0 ? nlohmann::json(options.random) : nlohmann::json()},
          {"seed", options.seed ? nlohmann::json(*options.seed) : nlohmann::json()},
          {"parallel", options.parallel},
          {"ranks", options.ranks},
          {"tags", options.tags}};
}

void check_counts(int parallel, int ranks) {
  if (parallel < 1) fail(fmt::format("sweep: --parallel must be 1 or more, got {}", parallel));
  if (ranks < 1) fail(fmt::format("sweep: --ranks must be 1 or more, got {}", ranks));
}

void new_sweep(SweepOptions options, const std::string& command_line) {
  check_counts(options.parallel, options.ranks);
  if (options.grid.empty()) fail("sweep: no --grid given; name a key and its values, e.g. --grid train.lr=1e-3,3e-3");
  if (options.seed && options.random == 0) fail("sweep: --seed draws --random points; give --random N too");
  if (options.random > 0 && !options.seed) options.seed = std::random_device{}();
  SweepPlan plan;
  plan.name = options.name.empty() ? "sweep-" + default_run_name(options.config_path) : options.name;
  kiln::check_run_name(plan.name);
  plan.base_config = read_config_json(options.config_path);
  for (const std::string& assignment : options.overrides) apply_override(plan.base_config, assignment);
  plan.tags = options.tags;
  for (const std::string& tag : plan.tags) store::require_utf8(tag, "the tag");
  plan.parallel = options.parallel;
  plan.ranks = options.ranks;

  // Every point is checked against the config before anything is recorded or launched.
  const std::vector<SweepPoint> points = sweep_points(options);
  const auto count = static_cast<int64_t>(points.size());
  std::vector<std::string> params;
  for (int64_t p = 0; p < count; ++p) {
    point_config(plan.base_config, point_overrides(points[static_cast<size_t>(p)]), p);
    params.push_back(point_params(points[static_cast<size_t>(p)]).dump());
  }
  kiln::check_run_name(point_run_name(plan.name, count - 1, count));
  place_folder(plan);
  const SweepSlots slots = slots_for(plan);  // refuses more slots than GPUs before recording
  const std::string kiln = launch::this_kiln();

  plan.store_path = absolute(resolve_store_path(options.store, config_from_json(plan.base_config).store.path));
  auto db = store::open_store(plan.store_path, store::Access::ReadWrite);
  for (int64_t p = 0; p < count; ++p)
    if (const auto taken = store::find_run_named(*db, point_run_name(plan.name, p, count)))
      fail(fmt::format("sweep: a run named '{}' already exists in {} (id {}); choose another --name",
                       point_run_name(plan.name, p, count), plan.store_path, *taken));
  store::NewSweep sweep{plan.name, spec_of(options, plan.base_config).dump(), command_line, fs::current_path().string(),
                        host_name(), static_cast<int64_t>(::getpid()), params};
  plan.id = store::create_sweep(*db, sweep);
  write_base_config(plan);

  std::vector<SweepTask> tasks;
  for (int64_t p = 0; p < count; ++p)
    tasks.push_back(fresh_task(plan, p, point_run_name(plan.name, p, count), point_overrides(points[static_cast<size_t>(p)])));
  fmt::print("sweep {}: {} points, {} at a time{}, recorded in {}; logs in {}\n", plan.name, count, plan.parallel,
             plan.ranks > 1 ? fmt::format(" of {} ranks each", plan.ranks) : "", plan.store_path, plan.folder);
  std::fflush(stdout);
  launch_points(plan, tasks, slots, kiln, count);
}

// What a resumed sweep does with a point that has a run: nothing (completed, or live in another
// process), continue it from its checkpoint, or run it again from the start.
enum class Next { Skip, Continue, Restart };

bool has_checkpoint(const std::string& root, const std::string& checkpoint_dir) {
  if (!fs::is_directory(root)) return false;
  try {
    find_checkpoint(root, checkpoint_dir);
    return true;
  } catch (const Error&) {
    return false;
  }
}

Next next_for(const store::RunRecord& run, bool has_checkpoint, bool retry_failed) {
  using store::RunStatus;
  switch (run.status) {
    case RunStatus::Completed:
    case RunStatus::Running:
    case RunStatus::Paused:
      return Next::Skip;
    case RunStatus::Failed:
    case RunStatus::Created:
      if (has_checkpoint) return Next::Continue;
      return retry_failed ? Next::Restart : Next::Skip;
    default:  // stopped, lost, released
      return has_checkpoint ? Next::Continue : Next::Restart;
  }
}

void resume_sweep(const SweepOptions& options) {
  const std::string store_path = absolute(resolve_store_path(options.store));
  if (!fs::exists(store_path)) fail("store: no store at " + store_path + " (give --store PATH or set KILN_STORE)");
  auto db = store::open_store(store_path, store::Access::ReadWrite);
  SweepPlan plan;
  plan.id = store::resolve_sweep(*db, options.resume);
  plan.store_path = store_path;
  const store::ClaimedSweep claimed =
      store::claim_sweep(*db, plan.id, host_name(), static_cast<int64_t>(::getpid()), store::kDefaultStaleAfterS);
  // From here on the sweep is this process's: ended again whatever happens before launching.
  std::vector<SweepTask> tasks;
  const auto count = static_cast<int64_t>(claimed.points.size());
  try {
    const nlohmann::json spec = nlohmann::json::parse(claimed.spec_json);
    plan.name = claimed.name;
    plan.base_config = spec.at("base_config");
    plan.tags = spec.value("tags", std::vector<std::string>{});
    plan.parallel = options.parallel_given ? options.parallel : spec.value("parallel", 1);
    plan.ranks = spec.value("ranks", 1);
    check_counts(plan.parallel, plan.ranks);
    if (!claimed.workdir.empty() && fs::is_directory(claimed.workdir)) fs::current_path(claimed.workdir);
    place_folder(plan);
    write_base_config(plan);

    for (const auto& point : claimed.points) {
      const std::vector<std::string> overrides = params_overrides(nlohmann::ordered_json::parse(point.params_json));
      const std::string run_name = point.run_name.empty() ? point_run_name(plan.name, point.point, count) : point.run_name;
      SweepTask task = fresh_task(plan, point.point, run_name, overrides);
      const auto run_id = store::find_run_named(*db, run_name);
      if (!run_id) {  // never launched, or it failed before its run was recorded
        tasks.push_back(std::move(task));
        continue;
      }
      const store::RunRecord run = store::get_run(*db, *run_id);
      const std::string dir = point_config(plan.base_config, overrides, point.point).train.checkpoint_dir;
      const std::string root = run_checkpoint_root(dir, run_name);
      switch (next_for(run, has_checkpoint(root, dir), options.retry_failed)) {
        case Next::Skip:
          fmt::print("sweep {}: point {} {} is {}{}\n", plan.name, point.point, run_name, store::to_string(run.status),
                     run.status == store::RunStatus::Failed ? " without a checkpoint; --retry-failed runs it again" : "");
          break;
        case Next::Continue:
          task.train_args = {"--resume", absolute(root), "--store", plan.store_path, "--sweep-point",
                             fmt::format("{}:{}", plan.id, point.point)};
          task.params += " (continued from its checkpoint)";
          tasks.push_back(std::move(task));
          break;
        case Next::Restart:
          // Its record goes: the run starts again under the same name, as the point's one run.
          store::remove_run(*db, *run_id, true);
          task.params += " (again from the start)";
          tasks.push_back(std::move(task));
          break;
      }
    }
    fmt::print("sweep {}: resumed: {} of {} points to run, {} at a time\n", plan.name, tasks.size(), count, plan.parallel);
    std::fflush(stdout);
  } catch (...) {
    store::end_sweep(*db, plan.id, claimed.ended_as);
    throw;
  }
  // Its slots are checked once it is taken up (--parallel may ask for more GPUs than there
  // are): a sweep that cannot launch is recorded as interrupted, as one stopped launching.
  SweepSlots slots;
  std::string kiln;
  try {
    slots = slots_for(plan);
    kiln = launch::this_kiln();
  } catch (...) {
    store::end_sweep(*db, plan.id, store::SweepStatus::Interrupted);
    throw;
  }
  db.reset();
  launch_points(plan, tasks, slots, kiln, count);
}

}  // namespace

void add_sweep_command(CLI::App& app, std::string command_line) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Train a config at many settings (a grid or random points), K runs at a time (docs/sweeps.md)");
  cmd->add_option("-c,--config", options->config_path, "Base JSON run config (default: the tiny demo config)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--grid", options->grid,
                  "A key and its values: section.key=v1,v2,... or, with --random, a range lo..hi or log:lo..hi (repeat)")
      ->allow_extra_args(false);
  cmd->add_option("--random", options->random, "Draw N distinct points instead of the whole grid");
  cmd->add_option("--seed", options->seed, "The seed of --random's draws (default: a random one, recorded)");
  CLI::Option* parallel = cmd->add_option("--parallel", options->parallel, "Points trained at a time (default 1)");
  cmd->add_option("--ranks", options->ranks, "Processes per point: each point's kiln train --ranks R starts them under mpirun");
  cmd->add_option("--name", options->name, "The sweep's name; its runs are NAME-0, NAME-1, ... (default: sweep-CONFIG-TIME)");
  cmd->add_option("--set", options->overrides, "Override a base config key for every point: section.key=value")
      ->allow_extra_args(false);
  cmd->add_option("--tag", options->tags, "Tag every run (the sweep's name is always a tag)")->allow_extra_args(false);
  cmd->add_option("--store", options->store, "Run store file (default: $KILN_STORE, else store.path, else ./kiln-runs.db)");
  CLI::Option* resume = cmd->add_option("--resume", options->resume,
                                        "Continue an interrupted sweep (its name or id) from its recorded spec");
  cmd->add_flag("--retry-failed", options->retry_failed, "With --resume: run failed points without a checkpoint again")
      ->needs(resume);
  for (const char* fresh : {"--config", "--grid", "--random", "--seed", "--ranks", "--name", "--set", "--tag"})
    resume->excludes(fresh);
  add_sweep_view_commands(*cmd);
  cmd->callback([cmd, options, parallel, command_line] {
    if (!cmd->get_subcommands().empty()) return;  // kiln sweep list / show
    options->parallel_given = parallel->count() > 0;
    if (options->resume.empty()) new_sweep(*options, command_line);
    else resume_sweep(*options);
  });
}

}  // namespace kiln
