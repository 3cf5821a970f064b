#include "cli/train_command.h"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "base/human_format.h"
#include "base/run_names.h"
#include "cli/next_steps.h"
#include "cli/rank_launch.h"
#include "cli/serve_command.h"
#include "cli/server_token.h"
#include "cli/store_path.h"
#include "launch/hostfile.h"
#include "launch/supervised_run.h"
#include "launch/train_command.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/parallel/launch.h"
#include "trainer/parallel/wait_limits.h"
#include "trainer/plan/rank_build.h"
#include "trainer/parallel/world.h"
#include "trainer/plan/planner.h"
#include "trainer/train/backend.h"
#include "trainer/train/interrupt.h"
#include "trainer/train/trainer.h"

namespace kiln {

namespace {


// --layout auto: the config with the planner's fastest fitting layout for `ranks` ranks (its
// parallel section, micro-batch and recomputation), said on the first rank's output.
Config with_planned_layout(const Config& config, const TrainOptions& options, int ranks, std::FILE* out) {
  const std::string name = !options.plan_device.empty() ? options.plan_device : uses_gpu(config.backend) ? "h100" : "cpu";
  const PlannedLayout best = best_layout(config, ranks, device_spec(name));
  if (out != nullptr)
    fmt::print(out, "kiln: layout auto: {} for {} rank{} of {}: {:.1f} ms a step planned, {} on the rank that needs the "
                    "most (kiln plan lists the others)\n",
               best.name, ranks, ranks == 1 ? "" : "s", name, best.time.step_s * 1e3, human_bytes(best.memory.total()));
  return best.config;
}

// Where --resume looks: train.checkpoint_dir as this command sets it (a config file, --set),
// else the default. Read without validating: the config that runs is the checkpoint's.
std::string checkpoint_dir(const TrainOptions& options) {
  nlohmann::json j = options.config_path.empty() ? nlohmann::json::object()
                                                 : read_config_json(options.config_path);
  for (const std::string& assignment : options.overrides) apply_override(j, assignment);
  const nlohmann::json dir = j.value("/train/checkpoint_dir"_json_pointer, nlohmann::json());
  return dir.is_string() ? dir.get<std::string>() : TrainConfig{}.checkpoint_dir;
}

// --sweep-point SWEEP_ID:POINT: two whole numbers, the sweep's id in the store and the point.
std::pair<int64_t, int64_t> parse_sweep_point(const std::string& text) {
  int64_t sweep = 0, point = 0;
  char colon = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%ld%c%ld%c", &sweep, &colon, &point, &extra) != 3 || colon != ':' || sweep < 1 ||
      point < 0)
    fail("--sweep-point " + text + ": expected SWEEP_ID:POINT, e.g. 3:0 (kiln sweep passes it)");
  return {sweep, point};
}

// The dashboard this command serves, as the store records it for kiln runs resume and fork:
// whether it has a token, never the token.
store::RunLaunch recorded_launch(const TrainOptions& options) {
  store::RunLaunch launch;
  if (options.serve.empty()) return launch;
  launch.serve = options.serve;
  launch.allowed_hosts = options.dashboard.allowed_hosts;
  launch.max_connections = static_cast<int64_t>(options.dashboard.max_connections);
  launch.max_subscribers = static_cast<int64_t>(options.dashboard.max_subscribers);
  launch.token = !resolve_token(options.dashboard.token).empty();
  return launch;
}

// The config to train with. resume: the checkpoint --resume names; dropped_hook: the alert
// hook its config held that this run does not run.
Config resolve_config(const TrainOptions& options, std::string& resume, std::string& dropped_hook) {
  if (options.resume.empty()) return load_config(options.config_path, options.overrides);
  resume = find_checkpoint_to_resume(options.resume, checkpoint_dir(options));
  // Resuming continues the checkpoint's run: its config, unless a file is given, with this
  // command's --set on top (train.steps=..., say), less the checkpoint's hook.
  if (options.config_path.empty()) {
    ResumedConfig resumed = resumed_config(resume, options.overrides);
    dropped_hook = std::move(resumed.dropped_hook);
    return std::move(resumed.config);
  }
  return load_config(options.config_path, options.overrides);
}

// Says which hook a resumed run did not run and how to give it: the command as a JSON string,
// so what a checkpoint holds reaches the terminal as text, never as control sequences.
void say_dropped_hook(std::FILE* out, const std::string& hook) {
  fmt::print(out,
             "kiln: warning: not running the alert hook the checkpoint holds, alerts.command {}: a resumed run runs "
             "only a hook its own command line gives (--set alerts.command=COMMAND, or a --config file that sets it)\n",
             nlohmann::json(hook).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
  std::fflush(out);
}

// kiln train --max-restarts K / --hostfile F: this process starts the ranks and supervises
// them (launch/supervised_run.h); its exit status is the last attempt's.
int supervise_training(const TrainOptions& options) {
  const int ranks = options.ranks.value_or(1);
  if (launched_by_mpi())
    fail(fmt::format("--max-restarts and --hostfile start the ranks themselves, and this process is already one of {} "
                     "an MPI launcher started; drop them, or drop the launcher",
                     launched_world_size()));
  if (ranks < 1) fail(fmt::format("--ranks {}: expected a number of processes of 1 or more", ranks));
  if (!options.hostfile.empty() && !options.ranks) fail("--hostfile needs --ranks N: how many ranks to spread over its hosts");
  launch::SupervisedRun run;
  run.ranks = ranks;
  run.max_restarts = options.max_restarts.value_or(0);
  run.exclude_failed = options.exclude_failed;
  if (!options.hostfile.empty()) {
    run.hosts = launch::read_hostfile(options.hostfile);
    launch::ranks_per_host(ranks, run.hosts);
  }
  std::string resume, dropped_hook;
  const Config config = resolve_config(options, resume, dropped_hook);
  run.run_name = !options.name.empty() ? options.name
                 : !resume.empty()     ? Checkpoint(resume).state().run_name
                                       : default_run_name(options.config_path);
  kiln::check_run_name(run.run_name);
  if (!options.no_store) run.store_path = resolve_store_path(options.store, config.store.path);
  run.kiln = launch::this_kiln();
  // The first attempt is the command as typed; a restart resumes the run's checkpoint, whose
  // config is the one that ran (--layout auto's choice included).
  const std::vector<std::string> name = {"--name=" + run.run_name};
  run.first_args = own_arguments_less({"--ranks", "--max-restarts", "--hostfile", "--name"}, {"--exclude-failed"});
  run.restart_args = own_arguments_less(
      {"--ranks", "--max-restarts", "--hostfile", "--name", "--resume", "--config", "-c", "--layout", "--plan-device"},
      {"--exclude-failed", "--force"});
  run.first_args.insert(run.first_args.end(), name.begin(), name.end());
  run.restart_args.insert(run.restart_args.end(), name.begin(), name.end());
  const std::string root = run_checkpoint_root(config.train.checkpoint_dir, run.run_name);
  run.newest_checkpoint = [root, dir = config.train.checkpoint_dir]() -> std::optional<launch::RestartPoint> {
    if (!std::filesystem::exists(root)) return std::nullopt;
    try {
      const std::string path = find_checkpoint_to_resume(root, dir);
      return launch::RestartPoint{path, Checkpoint(path).state().step};
    } catch (const Error& e) {
      fmt::print(stderr, "kiln: warning: no checkpoint to restart from: {}\n", e.what());
      return std::nullopt;
    }
  };
  run.layout_refusal = [config](int left) -> std::string {
    try {
      parallel_layout(config, left);
      return {};
    } catch (const Error& e) {
      return e.what();
    }
  };
  return launch::supervise_run(run);
}

}  // namespace

void run_train(const TrainOptions& options, const std::string& command_line) {
  if (options.max_restarts || !options.hostfile.empty()) {
    if (const int status = supervise_training(options); status != 0) throw CLI::RuntimeError(status);
    return;
  }
  if (options.ranks) start_ranks(*options.ranks);
  // The name becomes a folder under train.checkpoint_dir: refused before anything starts.
  if (!options.name.empty()) kiln::check_run_name(options.name);
  std::string resume, dropped_hook;
  Config config = resolve_config(options, resume, dropped_hook);
  if (options.print_config) {
    if (!dropped_hook.empty()) say_dropped_hook(stderr, dropped_hook);
    fmt::print("{}\n", config_to_json(config).dump(2));
    return;
  }
  RecordOptions record;
  record.name = options.name.empty() ? default_run_name(options.config_path) : options.name;
  record.name_given = !options.name.empty();
  record.command_line = command_line;
  record.tags = options.tags;
  record.force_resume = options.force;
  record.restart = options.restart;
  if (!options.sweep_point.empty()) std::tie(record.sweep_id, record.sweep_point) = parse_sweep_point(options.sweep_point);
  World world;
  set_wait_limits({config.parallel.timeout_s, interrupt_requested});
  // Rank 0 speaks for the run: it prints and records; the other ranks train in silence.
  const bool first = world.comm().rank() == 0;
  if (first && !dropped_hook.empty()) say_dropped_hook(stdout, dropped_hook);
  if (options.layout == "auto") config = with_planned_layout(config, options, world.comm().size(), first ? stdout : nullptr);
  if (!options.no_store && first) {
    record.store_path = resolve_store_path(options.store, config.store.path);
    record.launch = recorded_launch(options);
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> quiet(first ? nullptr : std::fopen("/dev/null", "we"),
                                                         std::fclose);
  TrainSummary summary;
  try {
    // The server binds before the run is recorded, so a port in use fails with nothing in
    // the store; it starts serving once the trainer has created the run, and reads the store
    // like any other client: the training loop never waits on it.
    std::unique_ptr<monitor::Server> server;
    if (!options.serve.empty() && first)
      server = make_dashboard_server(record.store_path, options.serve, options.dashboard, true);
    Trainer trainer(config, world.comm(), record, resume, first ? stdout : quiet.get());
    if (server) {
      server->start();
      fmt::print("dashboard: {}\n", server->url());
      std::fflush(stdout);
    }
    summary = trainer.run();
  } catch (const std::exception& e) {
    world.end_after_error(e);
    throw;
  }
  // The commands after it find the same store only if it is the one they find by default.
  const FinishedRun finished{summary.run_name, store_flag(record.store_path), !record.store_path.empty(),
                             summary.last_checkpoint, config.train.sample_prompt.first()};
  // A run released or interrupted (Ctrl-C, SIGTERM) ends with how to go on from the
  // checkpoint it stopped with, the same line either way.
  if (first && (summary.released || summary.interrupted) && finished.recorded && !finished.last_checkpoint.empty())
    fmt::print("kiln: {}\n", continue_line(finished.name, finished.store_flag));
  if (summary.interrupted) throw CLI::RuntimeError(130);
  if (!first) return;
  fmt::print("{}", next_steps(finished));
}


std::string shell_command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) line += (i ? " " : "") + shell_quote(argv[i]);
  return line;
}

void add_train_command(CLI::App& app, std::string command_line) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model (the tiny demo config when no --config is given)");
  cmd->add_option("-c,--config", options->config_path, "JSON run config")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", options->overrides,
                  "Override a config key: section.key=value (value parsed as JSON, else a string)")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--name", options->name,
                  "Name of the run in the store and of its checkpoint folder: letters, digits, -_. "
                  "(default: the config's file name and the time)");
  cmd->add_option("--tag", options->tags, "Tag the run (repeat for several)")
      ->allow_extra_args(false);
  CLI::Option* store = cmd->add_option(
      "--store", options->store,
      "Run store file (default: $KILN_STORE, else store.path, else ./kiln-runs.db)");
  cmd->add_flag("--no-store", options->no_store, "Do not record the run in a store")
      ->excludes(store);
  CLI::Option* resume = cmd->add_option(
      "--resume", options->resume,
      "Continue from a checkpoint: its folder, a run's checkpoint folder (its latest), or `latest` "
      "(the newest under train.checkpoint_dir)");
  CLI::Option* serve = cmd->add_option(
      "--serve", options->serve,
      "Serve the dashboard at HOST:PORT while training (e.g. 127.0.0.1:8080; docs/dashboard.md)");
  serve->excludes("--no-store");
  add_dashboard_options(cmd, options->dashboard, serve);
  cmd->add_flag("--force", options->force,
                "With --resume: continue a run the store still shows as running (its process is gone)")
      ->needs(resume);
  CLI::Option* layout = cmd->add_option(
      "--layout", options->layout,
      "auto: train with the planner's fastest layout for the launched ranks (kiln plan; docs/planner.md)")
      ->check(CLI::IsMember({"auto"}));
  cmd->add_option("--plan-device", options->plan_device,
                  "The device --layout auto plans for: h100, h200, a100, a100-40gb or cpu (default: cpu, or h100 on a GPU)")
      ->needs(layout);
  layout->excludes(resume);
  cmd->add_option("--restart", options->restart,
                  "N: this training is the run's Nth restart after a failure (kiln train --max-restarts passes it)")
      ->check(CLI::PositiveNumber)
      ->needs(resume)
      ->group("");
  cmd->add_option("--sweep-point", options->sweep_point,
                  "SWEEP_ID:POINT: record the run as this point of a sweep (kiln sweep passes it; docs/sweeps.md)");
  CLI::Option* ranks = cmd->add_option(
      "--ranks", options->ranks,
      "Train as N processes: starts mpirun -np N itself, as this machine needs it (docs/parallelism.md)");
  CLI::Option* restarts = cmd->add_option(
      "--max-restarts", options->max_restarts,
      "Start the run again from its newest checkpoint when it fails, up to K times (docs/resilience.md)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* hostfile = cmd->add_option(
      "--hostfile", options->hostfile,
      "Spread the --ranks over the machines of this Open MPI hostfile, the same number on each (docs/resilience.md)")
      ->needs(ranks);
  cmd->add_flag("--exclude-failed", options->exclude_failed,
                "With --max-restarts and --hostfile: restart without the hosts that failed, with fewer data-parallel "
                "ranks where the layout allows")
      ->needs(restarts)
      ->needs(hostfile);
  cmd->add_flag("--print-config", options->print_config,
                "Print the resolved config as JSON and exit")
      ->excludes(ranks)
      ->excludes(restarts)
      ->excludes(hostfile);
  cmd->callback([options, command_line] { run_train(*options, command_line); });
}

}  // namespace kiln
