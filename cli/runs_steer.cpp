// kiln runs pause | resume | stop | checkpoint | set | release: steer a live run through the store's
// commands queue. The training process reads pending commands at each step boundary and
// marks each applied or rejected; --wait follows the command until it does.
#include <fmt/core.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "store/run_figures.h"
#include "cli/next_steps.h"
#include "cli/runs_command.h"
#include "cli/runs_relaunch.h"
#include "cli/runs_store.h"
#include "cli/store_path.h"
#include "base/check.h"
#include "base/terminal_text.h"
#include "store/commands.h"
#include "store/run_queries.h"
#include "trainer/parallel/gpu_placement.h"
#include "trainer/steer/setting.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kDefaultWaitS = 30;
constexpr auto kPollInterval = std::chrono::milliseconds(100);

// Exit codes of --wait beyond 0 (applied).
constexpr int kExitRejected = 1;
constexpr int kExitNotApplied = 2;  // timed out, or the run ended first

struct SteerOptions {
  std::string store;
  std::string run;
  std::string assignment;  // set only: key=value
  bool force = false;      // set only: past the setting's sane range
  bool wait = false;
  std::string wait_text;  // --wait's optional SECONDS
};

double wait_seconds(const std::string& text) {
  if (text.empty()) return kDefaultWaitS;
  double seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds) ||
      seconds <= 0)
    fail("--wait: '" + text + "' is not a number of seconds greater than 0");
  return seconds;
}

store::Command find_command(store::Database& db, int64_t run_id, int64_t command_id) {
  for (const auto& c : store::list_commands(db, run_id))
    if (c.id == command_id) return c;
  fail(fmt::format("command {} is gone from the store (was its run removed?)", command_id));
}

// Polls until the command is decided; returns the exit code.
int wait_for(store::Database& db, int64_t run_id, int64_t command_id, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    // The run is read before the command: a run that had already ended by then, with the
    // command still pending, can never apply it.
    const store::RunRecord run = store::get_run(db, run_id);
    const store::Command command = find_command(db, run_id, command_id);
    if (command.status == store::CommandStatus::Applied) {
      // The reason says what the run did: "paused", "checkpoint; wrote PATH", ...
      fmt::print("applied at step {}{}\n", command.applied_step.value_or(-1),
                 command.reason.empty() ? "" : ": " + terminal_line(command.reason));
      return 0;
    }
    if (command.status == store::CommandStatus::Rejected) {
      fmt::print("rejected: {}\n", command.reason.empty() ? "(no reason given)" : terminal_line(command.reason));
      return kExitRejected;
    }
    if (!store::is_live(run.status)) {
      fmt::print(stderr, "kiln: run {} is {}; command {} was never applied\n", run.id,
                 store::to_string(run.status), command_id);
      return kExitNotApplied;
    }
    if (Clock::now() >= deadline) {
      fmt::print(stderr,
                 "kiln: command {} still pending after {} s; it stays queued for the run's next "
                 "step boundary\n",
                 command_id, timeout_s);
      return kExitNotApplied;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// A release is done when the process has ended the run: its devices are free then.
int wait_until_released(store::Database& db, int64_t run_id, const std::string& store, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const store::RunRecord run = store::get_run(db, run_id);
    if (run.status == store::RunStatus::Released) {
      fmt::print("released; {}\n", continue_line(run.name, store_flag(resolve_store_path(store))));
      return 0;
    }
    if (!store::is_live(run.status)) {
      fmt::print(stderr, "kiln: run {} ended as {} instead\n", run.id, store::to_string(run.status));
      return kExitNotApplied;
    }
    if (Clock::now() >= deadline) {
      fmt::print(stderr, "kiln: run {} applied the release but has not ended after {} s\n", run.id, timeout_s);
      return kExitNotApplied;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

void steer(store::CommandAction action, const SteerOptions& options) {
  if (action == store::CommandAction::Set) parse_setting(options.assignment);  // before the store is opened
  const double timeout_s = wait_seconds(options.wait_text);
  const auto db = open_store_for_writing(options.store);
  const int64_t run_id = store::resolve_run(*db, options.run);
  // The store's argument for set: checked against the run's own config and normalised to
  // key=value, so the trainer reads back exactly the number that was checked here.
  const std::string argument =
      action == store::CommandAction::Set
          ? checked_setting(options.assignment, store::get_run(*db, run_id).config_json, options.force,
                            "add --force to set it anyway")
          : "";
  const int64_t command_id = store::insert_command(*db, run_id, action, argument);
  const store::RunRecord run = store::get_run(*db, run_id);
  fmt::print("queued {}{} for run {} ({}) as command {}; it applies at the next step boundary\n",
             store::to_string(action), argument.empty() ? "" : " " + argument, run.id, run.name,
             command_id);
  std::fflush(stdout);
  if (!options.wait) return;
  int code = wait_for(*db, run_id, command_id, timeout_s);
  if (code == 0 && action == store::CommandAction::Release) code = wait_until_released(*db, run_id, options.store, timeout_s);
  if (code != 0) throw CLI::RuntimeError(code);
}

CLI::App* add_steer_command(CLI::App& runs, store::CommandAction action, const std::string& help) {
  auto options = std::make_shared<SteerOptions>();
  CLI::App* cmd = runs.add_subcommand(std::string(store::to_string(action)), help);
  cmd->add_option("run", options->run, "Run id, name, or unambiguous name prefix")->required();
  if (action == store::CommandAction::Set) {
    cmd->add_option("setting", options->assignment, "key=value; the keys: " + hot_settings())
        ->required();
    cmd->add_flag("--force", options->force,
                  "Queue a value beyond the setting's sane range (train.lr above 10x the configured peak, ...)");
  }
  add_store_option(cmd, options->store);
  CLI::Option* wait =
      cmd->add_option("--wait", options->wait_text,
                      "Wait until the run applies or rejects the command (at most SECONDS, "
                      "default 30); exit 0 applied, 1 rejected, 2 not applied in time")
          ->expected(0, 1)
          ->type_name("[SECONDS]");
  cmd->callback([options, action, wait] {
    options->wait = wait->count() > 0;
    steer(action, *options);
  });
  return cmd;
}

// kiln runs resume: a paused run is told to go on; a run that has ended (released, stopped,
// failed, lost), or whose process on this host is gone, starts again from its newest
// checkpoint as the same run.
void add_resume_command(CLI::App& runs) {
  auto options = std::make_shared<SteerOptions>();
  auto relaunch = std::make_shared<RelaunchOptions>();
  CLI::App* cmd = runs.add_subcommand(
      "resume", "Resume a paused run, or start a released (stopped, failed, lost, killed) run again from its newest checkpoint");
  cmd->add_option("run", options->run, "Run id, name, or unambiguous name prefix")->required();
  add_store_option(cmd, options->store);
  CLI::Option* wait = cmd->add_option("--wait", options->wait_text,
                                      "A paused run: wait until it applies the command (at most SECONDS, default 30)")
                          ->expected(0, 1)
                          ->type_name("[SECONDS]");
  add_relaunch_options(cmd, *relaunch);
  cmd->callback([options, relaunch, wait] {
    options->wait = wait->count() > 0;
    store::RunRecord run;
    {
      const auto db = open_store_for_reading(options->store);
      run = store::get_run(*db, store::resolve_run(*db, options->run));
    }
    const std::string here = host_name();
    if (store::is_live(run.status) && !store::recorder_gone(run, here)) {
      if (!relaunch->overrides.empty() || relaunch->ranks != 0 || relaunch->detach ||
          relaunch->token.token_given || !relaunch->token.file.empty())
        fail("--set, --ranks, --detach and the token start an ended run again; this run is live (use kiln runs set)");
      // Only this host can tell a dead process from a live one.
      if (run.status == store::RunStatus::Running && !run.host.empty() && run.host != here)
        fmt::print(stderr,
                   "kiln: run {} runs on {}, not here: kiln cannot tell whether its process lives, so it queues a "
                   "resume as for a paused run; if the process died, resume it there, or here once it reads as "
                   "lost ({:.0f} s without a heartbeat)\n",
                   run.id, run.host, store::kDefaultStaleAfterS);
      steer(store::CommandAction::Resume, *options);
      return;
    }
    if (options->wait) fail("--wait follows a command to a live run; this run starts again from its checkpoint");
    relaunch->store = options->store;
    relaunch->run = options->run;
    relaunch_run(*relaunch);
  });
}

}  // namespace

void add_runs_steer_commands(CLI::App& runs) {
  using A = store::CommandAction;
  add_steer_command(runs, A::Pause, "Pause a live run at its next step boundary");
  add_resume_command(runs);
  add_steer_command(runs, A::Stop, "Stop a live run at its next step boundary (it ends as stopped)");
  add_steer_command(runs, A::Checkpoint, "Save a checkpoint of a live run at its next step boundary");
  add_steer_command(runs, A::Release,
                    "Checkpoint a live run at its next step boundary and end it as released, freeing its "
                    "devices; kiln runs resume starts it again")
      ->footer("With --wait: until the run has ended as released (exit 0), not only applied the command.");
  add_runs_fork_command(runs);
  add_steer_command(runs, A::Set,
                    "Change a setting of a live run at its next step boundary, e.g. train.lr=3e-4");
}

}  // namespace kiln
