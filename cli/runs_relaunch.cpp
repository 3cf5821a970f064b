#include "cli/runs_relaunch.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/next_steps.h"
#include "cli/runs_command.h"
#include "cli/runs_store.h"
#include "cli/store_path.h"
#include "base/check.h"
#include "base/child_process.h"
#include "store/run_figures.h"
#include "store/run_queries.h"
#include "store/user_text.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Options of the recorded `kiln train` that the relaunch sets itself (the config is the
// checkpoint's, which holds every --set the run was given and the layout --layout auto
// chose), or that must not be repeated (a redacted token, a sweep's point).
constexpr std::array<std::string_view, 9> kReplacedWithValue = {
    "--config", "-c", "--resume", "--name", "--layout", "--plan-device", "--token", "--sweep-point", "--store"};
constexpr std::array<std::string_view, 3> kReplacedFlags = {"--force", "--print-config", "--no-store"};

bool listed(const auto& names, std::string_view option) {
  return std::find(names.begin(), names.end(), option) != names.end();
}

// The options of the recorded command line after `train` that the relaunch keeps (tags,
// --serve and its dashboard options, ...), as words.
std::vector<std::string> kept_options(const std::string& command_line) {
  const std::vector<std::string> words = shell_words(command_line);
  const auto train = std::find(words.begin(), words.end(), "train");
  std::vector<std::string> kept;
  if (train == words.end()) return kept;
  for (auto it = train + 1; it != words.end(); ++it) {
    const std::string& word = *it;
    const std::string option = word.substr(0, word.find('='));
    const bool inline_value = option.size() < word.size();
    if (option == "--set") {
      // --set takes every value up to the next option.
      if (!inline_value)
        while (it + 1 != words.end() && (it + 1)->rfind("-", 0) != 0) ++it;
      continue;
    }
    if (listed(kReplacedWithValue, option)) {
      if (!inline_value && it + 1 != words.end()) ++it;
      continue;
    }
    if (listed(kReplacedFlags, option)) continue;
    kept.push_back(word);
  }
  return kept;
}

// A recorded checkpoint path, relative to the folder the run was started in.
fs::path checkpoint_folder(const store::RunRecord& run, const store::Checkpoint& checkpoint) {
  const fs::path path(checkpoint.path);
  return path.is_absolute() || run.workdir.empty() ? path : fs::path(run.workdir) / path;
}

// The newest complete checkpoint of the run at or before `step` (any step when nullopt).
store::Checkpoint pick_checkpoint(store::Database& db, const store::RunRecord& run,
                                  std::optional<int64_t> step) {
  std::vector<store::Checkpoint> checkpoints = store::list_checkpoints(db, run.id);
  std::sort(checkpoints.begin(), checkpoints.end(),
            [](const auto& a, const auto& b) { return a.step > b.step; });
  std::string steps;
  for (const store::Checkpoint& c : checkpoints) {
    steps += (steps.empty() ? "" : ", ") + std::to_string(c.step);
    if (step && c.step > *step) continue;
    std::error_code ec;
    if (fs::exists(checkpoint_folder(run, c) / "manifest.json", ec)) return c;
  }
  const std::string which = step ? fmt::format(" at or before step {}", *step) : std::string();
  if (checkpoints.empty())
    fail(fmt::format("run {} ('{}') wrote no checkpoint to start from; set train.checkpoint_interval, or "
                     "`kiln runs checkpoint` or `kiln runs release` it while it runs",
                     run.id, run.name));
  fail(fmt::format("run {} ('{}') has no checkpoint{} on disk (it recorded steps {}; a deleted or moved "
                   "folder cannot be used)",
                   run.id, run.name, which, steps));
}

// How many processes the run ran as: recorded since schema 7, else the layout's product.
int recorded_ranks(const store::RunRecord& run) {
  if (run.world_size) return static_cast<int>(*run.world_size);
  int ranks = 1;
  for (size_t at = 0; at < run.layout.size();) {
    const size_t digits = run.layout.find_first_of("0123456789", at);
    if (digits == std::string::npos) break;
    size_t end = run.layout.find_first_not_of("0123456789", digits);
    if (end == std::string::npos) end = run.layout.size();
    ranks *= std::max(1, std::stoi(run.layout.substr(digits, end - digits)));
    at = end;
  }
  return ranks;
}

std::string self_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find this kiln binary to start again (/proc/self/exe: " + ec.message() + ")");
  return exe.string();
}

// A name for the fork nobody has: NAME, or NAME-2, NAME-3, ...
std::string free_name(store::Database& db, const std::string& name) {
  for (int n = 1; n <= 1000; ++n) {
    const std::string candidate = n == 1 ? name : fmt::format("{}-{}", name, n);
    if (!store::find_run_named(db, candidate)) return candidate;
  }
  fail("no free run name like '" + name + "'; give --name");
}

struct Launch {
  std::vector<std::string> argv;
  std::string workdir;
  std::string log_path;  // with --detach
};

Launch plan_launch(const RelaunchOptions& options) {
  for (const std::string& assignment : options.overrides)
    if (assignment.find('=') == std::string::npos)
      fail("--set " + assignment + ": expected key=value");
  if (options.ranks < 0) fail(fmt::format("--ranks {}: expected a number of processes of 1 or more", options.ranks));
  const std::string store_path = fs::absolute(resolve_store_path(options.store)).string();
  const auto db = open_store_for_reading(options.store);
  const store::RunRecord run = store::get_run(*db, store::resolve_run(*db, options.run));
  if (store::is_live(run.status))
    fail(fmt::format("run {} ('{}') is {} in process {} on {}; {}", run.id, run.name, store::to_string(run.status),
                     run.pid.value_or(0), run.host,
                     options.fork_step ? "fork it from a checkpoint it has written, or release it first"
                                       : "release or stop it first (a paused run resumes where it is)"));
  if (!run.workdir.empty() && !fs::is_directory(run.workdir))
    fail(fmt::format("run {} ('{}') was started in {}, which is gone", run.id, run.name, run.workdir));
  const store::Checkpoint checkpoint = pick_checkpoint(*db, run, options.fork_step);

  Launch launch;
  launch.workdir = run.workdir.empty() ? fs::current_path().string() : run.workdir;
  const int ranks = options.ranks > 0 ? options.ranks : recorded_ranks(run);
  if (ranks > 1) {
    launch.argv = {"mpirun", "-np", std::to_string(ranks)};
    if (ranks > static_cast<int>(std::thread::hardware_concurrency())) launch.argv.push_back("--oversubscribe");
  }
  launch.argv.insert(launch.argv.end(), {self_path(), "train"});
  for (const std::string& word : kept_options(run.command_line)) launch.argv.push_back(word);
  const std::string folder = checkpoint_folder(run, checkpoint).string();
  launch.argv.insert(launch.argv.end(), {"--resume", folder, "--store", store_path});
  std::string name = run.name;
  if (options.fork_step) {
    name = options.fork_name.empty() ? free_name(*db, fmt::format("{}-fork-{}", run.name, checkpoint.step))
                                     : options.fork_name;
    store::check_run_name(name);
    if (store::find_run_named(*db, name)) fail("a run named '" + name + "' already exists; choose another --name");
    launch.argv.insert(launch.argv.end(), {"--name", name});
  }
  for (const std::string& assignment : options.overrides) launch.argv.insert(launch.argv.end(), {"--set", assignment});
  if (options.detach) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    launch.log_path = (fs::path(folder).parent_path().parent_path() / (name + "-" + stamp + ".log")).string();
  }
  fmt::print("kiln: {} run {} ('{}') from {} (step {}) in {} as {} rank{}\n",
             options.fork_step ? "forking" : "resuming", run.id, run.name, folder, checkpoint.step,
             launch.workdir, ranks, ranks == 1 ? "" : "s");
  return launch;
}

[[noreturn]] void exec(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  const int error = errno;
  fmt::print(stderr, "kiln: error: cannot start {}: {}\n", argv[0], std::strerror(error));
  std::fflush(stderr);
  _exit(127);
}

void start(const Launch& launch) {
  std::string command;
  for (const std::string& word : launch.argv) command += (command.empty() ? "" : " ") + shell_quote(word);
  fmt::print("kiln: {}\n", command);
  if (::chdir(launch.workdir.c_str()) != 0)
    fail("cannot enter " + launch.workdir + ": " + std::strerror(errno));
  std::fflush(stdout);
  if (launch.log_path.empty()) {
    // The run takes this process's place, with nothing open of kiln's but its terminal.
    close_all_but_standard_streams();
    exec(launch.argv);
  }
  // Its own session, so the terminal's Ctrl-C and hang-up leave it running.
  ChildCommand child;
  child.argv = launch.argv;
  child.log_path = launch.log_path;
  child.detached = true;
  const pid_t pid = start_child(child);
  fmt::print("kiln: started as process {}; its output goes to {}\n", pid, launch.log_path);
}

}  // namespace

void relaunch_run(const RelaunchOptions& options) { start(plan_launch(options)); }

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
