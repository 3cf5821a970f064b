#include "cli/runs_relaunch.h"

#include <fmt/core.h>

#include <filesystem>
#include <memory>

#include "base/check.h"
#include "cli/next_steps.h"
#include "cli/runs_store.h"
#include "cli/server_token.h"
#include "cli/store_path.h"
#include "launch/relaunch.h"
#include "monitor/server/allowed_hosts.h"
#include "monitor/server/listen_address.h"
#include "monitor/server/server_limits.h"
#include "store/run_launch.h"
#include "trainer/parallel/gpu_placement.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

bool token_given(const TokenOptions& token) { return token.token_given || !token.file.empty(); }

// The words that serve the run's dashboard again as it was launched (its launch record, each
// value checked as `kiln train --serve` checks it when typed), or where --serve says, or none
// with --no-serve; and in launch.token the token it must have: the store holds only whether it
// had one, so it comes from this command. The recorded address, when something else holds it
// (kiln serve, as the demo suggests), becomes another port on the same host: a busy dashboard
// port never costs a training its start.
std::vector<std::string> dashboard_words(const store::RunRecord& run, const RelaunchOptions& options,
                                         launch::Relaunch& launch) {
  const TokenOptions& given = options.token;
  const std::string who = fmt::format("run {} ('{}')", run.id, run.name);
  if (options.no_serve) {
    if (token_given(given)) fail("--token and --token-file guard a dashboard, and --no-serve serves none");
    launch.notes.push_back(who + " trains without a dashboard of its own (--no-serve); kiln serve shows it");
    return {};
  }
  store::RunLaunch recorded;
  if (!run.launch_json.empty()) {
    try {
      recorded = store::parse_launch(run.launch_json);
    } catch (const Error& e) {
      fail(fmt::format("{} records a dashboard kiln would refuse: {}", who, e.what()));
    }
  } else if (options.serve.empty()) {
    if (token_given(given))
      fail(fmt::format("--token and --token-file guard a dashboard, and {} starts again without one", who));
    launch.notes.push_back(who + " was recorded before kiln kept how runs were launched (store schema 8), so it "
                                 "starts again without a dashboard (kiln serve shows it)");
    return {};
  }
  const std::string serve = options.serve.empty() ? recorded.serve : options.serve;
  if (serve.empty()) {
    if (token_given(given)) fail(fmt::format("--token and --token-file guard a dashboard, and {} served none", who));
    return {};
  }
  const std::string token = resolve_token(given);
  if (recorded.token && token.empty())
    fail(fmt::format("{} served its dashboard with a token, which kiln never stores; give it again with "
                     "--token-file FILE, $KILN_TOKEN or --token TOKEN",
                     who));
  monitor::ListenAddress address;
  try {
    address = monitor::parse_listen_address(serve);
    monitor::check_exposure(address, token);
    [[maybe_unused]] const monitor::AllowedHosts hosts(address, recorded.allowed_hosts);  // refuses a bad name
  } catch (const Error& e) {
    if (!options.serve.empty()) fail(fmt::format("--serve {}: {}", serve, e.what()));
    fail(fmt::format("{} records a dashboard kiln would refuse: {}", who, e.what()));
  }
  std::string where = serve;
  if (options.serve.empty()) {
    const monitor::ListenAddress free = monitor::free_listen_address(address);
    if (free.port != address.port) {
      where = monitor::to_string(free);
      launch.notes.push_back(fmt::format("{} is in use (a kiln serve there shows this run when it reads the same "
                                         "store), so {} serves its dashboard on {} instead; --serve HOST:PORT or "
                                         "--no-serve choose",
                                         serve, who, where));
    }
  }
  launch.token = token;
  if (!token.empty())
    launch.notes.push_back("the dashboard's token goes to the training in $KILN_TOKEN, off its command line");
  std::vector<std::string> words = {launch::with_value("--serve", where)};
  for (const std::string& host : recorded.allowed_hosts) words.push_back(launch::with_value("--allow-host", host));
  // The defaults are left out, as the user left them out.
  const auto count = [&](std::string_view option, int64_t value, size_t default_value) {
    if (value > 0 && static_cast<uint64_t>(value) != default_value)
      words.push_back(launch::with_value(option, std::to_string(value)));
  };
  count("--max-connections", recorded.max_connections, monitor::limits::kDefaultMaxConnections);
  count("--max-subscribers", recorded.max_subscribers, monitor::limits::kDefaultMaxSubscribers);
  return words;
}

}  // namespace

void relaunch_run(const RelaunchOptions& options) {
  for (const std::string& assignment : options.overrides)
    if (assignment.find('=') == std::string::npos)
      fail("--set " + assignment + ": expected key=value");
  if (options.ranks < 0) fail(fmt::format("--ranks {}: expected a number of processes of 1 or more", options.ranks));
  launch::RelaunchRequest request{options.run,   fs::absolute(resolve_store_path(options.store)).string(),
                                  options.overrides, options.ranks, options.detach, options.fork_step,
                                  options.fork_name, host_name()};
  const auto db = open_store_for_reading(options.store);
  const launch::Relaunch launch =
      launch::plan_relaunch(*db, request, [&](const store::RunRecord& run, launch::Relaunch& relaunch) {
        return dashboard_words(run, options, relaunch);
      });
  for (const std::string& note : launch.notes) fmt::print("kiln: {}\n", note);
  fmt::print("kiln: {} run {} ('{}') from {} (step {}) in {} as {} rank{}\n",
             options.fork_step ? "forking" : "resuming", launch.run.id, launch.run.name, launch.checkpoint,
             launch.step, launch.workdir, launch.ranks, launch.ranks == 1 ? "" : "s");
  std::string command;
  for (const std::string& word : launch::train_child(launch.command).argv)
    command += (command.empty() ? "" : " ") + shell_quote(word);
  fmt::print("kiln: {}\n", command);
  const pid_t pid = launch::start_relaunch(launch);
  fmt::print("kiln: started as process {}; its output goes to {}\n", pid, launch.command.log_path);
}

void add_relaunch_options(CLI::App* command, RelaunchOptions& options) {
  command->add_option("--set", options.overrides,
                      "Override a key of the checkpoint's config, e.g. train.steps=2000 (the model's keys stay)")
      ->take_all()
      ->allow_extra_args(false);
  command->add_option("--ranks", options.ranks,
                      "Start as this many processes, under mpirun (default: as many as the run had; the "
                      "data-parallel size follows)");
  command->add_flag("--detach", options.detach,
                    "Start in the background, its output in a log file beside the checkpoints");
  CLI::Option* serve = command->add_option(
      "--serve", options.serve,
      "Serve the run's dashboard on HOST:PORT (default: where it served, or another port there when that "
      "one is in use)");
  command->add_flag("--no-serve", options.no_serve, "Train without a dashboard of its own (kiln serve shows it)")
      ->excludes(serve);
  add_token_options(command, options.token);
}

void add_runs_fork_command(CLI::App& runs) {
  auto options = std::make_shared<RelaunchOptions>();
  auto step = std::make_shared<int64_t>(0);
  CLI::App* cmd = runs.add_subcommand(
      "fork", "Start a new run from a run's checkpoint at or before a step, with changed settings");
  cmd->add_option("run", options->run, "Run id, name, or unambiguous name prefix")->required();
  cmd->add_option("--step", *step, "Start from the run's newest checkpoint at or before this step")
      ->required()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--name", options->fork_name, "The new run's name (default: RUN-fork-STEP)");
  add_relaunch_options(cmd, *options);
  add_store_option(cmd, options->store);
  cmd->callback([options, step] {
    options->fork_step = *step;
    relaunch_run(*options);
  });
}

}  // namespace kiln
