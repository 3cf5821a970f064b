#include "cli/runs_relaunch.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>

#include "base/check.h"
#include "base/child_process.h"
#include "base/run_names.h"
#include "cli/next_steps.h"
#include "cli/runs_command.h"
#include "cli/runs_store.h"
#include "cli/server_token.h"
#include "cli/store_path.h"
#include "monitor/server/allowed_hosts.h"
#include "monitor/server/listen_address.h"
#include "monitor/server/server_limits.h"
#include "store/run_figures.h"
#include "store/run_launch.h"
#include "store/run_queries.h"
#include "store/user_text.h"
#include "trainer/parallel/gpu_placement.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

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
    fail(fmt::format("run {} ('{}') wrote no checkpoint to start from: it ended before its first, or could not "
                     "write it",
                     run.id, run.name));
  fail(fmt::format("run {} ('{}') has no checkpoint{} on disk (it recorded steps {}; a deleted or moved "
                   "folder cannot be used)",
                   run.id, run.name, which, steps));
}

// How many processes the run ran as: recorded since schema 7, else the layout's product
// (tp2.pp1.dp4: 8). Either is refused unless it is a count `--ranks` would take.
int recorded_ranks(const store::RunRecord& run) {
  int64_t ranks = 1;
  if (run.world_size) {
    ranks = *run.world_size;
  } else {
    for (size_t at = 0; at < run.layout.size() && ranks <= INT_MAX;) {
      const size_t digits = run.layout.find_first_of("0123456789", at);
      if (digits == std::string::npos) break;
      size_t end = run.layout.find_first_not_of("0123456789", digits);
      if (end == std::string::npos) end = run.layout.size();
      int64_t size = 0;
      const auto [stop, ec] = std::from_chars(run.layout.data() + digits, run.layout.data() + end, size);
      if (ec != std::errc() || size > INT_MAX) size = int64_t{INT_MAX} + 1;  // refused below
      ranks *= std::max<int64_t>(1, size);
      at = end;
    }
  }
  if (ranks < 1 || ranks > INT_MAX)
    fail(fmt::format("run {} ('{}') records {} processes, which is not a count kiln starts; give --ranks", run.id,
                     run.name, ranks));
  return static_cast<int>(ranks);
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
  std::string token;     // the dashboard's, handed to the training in $KILN_TOKEN
  std::vector<std::string> notes;  // said before it starts, once nothing can be refused
};

// An option with its value as one word, so no value (a tag "-x", say) reads as an option.
std::string with_value(std::string_view option, const std::string& value) {
  return fmt::format("{}={}", option, value);
}

// The run's tags, as `kiln train --tag` would take them.
std::vector<std::string> tag_words(const store::RunRecord& run) {
  std::vector<std::string> words;
  for (const std::string& tag : run.tags) {
    store::require_utf8(tag, "the tag");
    if (tag.find('\0') != std::string::npos)
      fail(fmt::format("run {} ('{}') has a tag holding a NUL byte, which no command line can pass", run.id,
                       run.name));
    words.push_back(with_value("--tag", tag));
  }
  return words;
}

bool token_given(const TokenOptions& token) { return token.token_given || !token.file.empty(); }

// The words that serve the run's dashboard again as it was launched (its launch record, each
// value checked as `kiln train --serve` checks it when typed), or where --serve says, or none
// with --no-serve; and in launch.token the token it must have: the store holds only whether it
// had one, so it comes from this command. The recorded address, when something else holds it
// (kiln serve, as the demo suggests), becomes another port on the same host: a busy dashboard
// port never costs a training its start.
std::vector<std::string> dashboard_words(const store::RunRecord& run, const RelaunchOptions& options, Launch& launch) {
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
  std::vector<std::string> words = {with_value("--serve", where)};
  for (const std::string& host : recorded.allowed_hosts) words.push_back(with_value("--allow-host", host));
  // The defaults are left out, as the user left them out.
  const auto count = [&](std::string_view option, int64_t value, size_t default_value) {
    if (value > 0 && static_cast<uint64_t>(value) != default_value)
      words.push_back(with_value(option, std::to_string(value)));
  };
  count("--max-connections", recorded.max_connections, monitor::limits::kDefaultMaxConnections);
  count("--max-subscribers", recorded.max_subscribers, monitor::limits::kDefaultMaxSubscribers);
  return words;
}

// A live-looking run whose process is gone (killed on this host) starts again like any ended
// one, said in a note; a run whose process lives, or that runs on another host, is refused.
void require_ended(const store::RunRecord& run, bool fork, Launch& launch) {
  if (!store::is_live(run.status)) return;
  if (store::recorder_gone(run, host_name())) {
    launch.notes.push_back(fmt::format("run {} ('{}') reads as {}, but its process {} on {} is gone (killed, or "
                                       "the machine restarted)",
                                       run.id, run.name, store::to_string(run.status), run.pid.value_or(0),
                                       run.host));
    return;
  }
  fail(fmt::format("run {} ('{}') is {} in process {} on {}; {}", run.id, run.name, store::to_string(run.status),
                   run.pid.value_or(0), run.host,
                   fork ? "fork it from a checkpoint it has written, or release it first"
                        : "release or stop it first (a paused run resumes where it is)"));
}

// `kiln train --resume` from the run's checkpoint, rebuilt from the store's fields and never
// from its recorded command line's text (anyone who can write the store can write that):
// the config is the checkpoint's, the tags, dashboard and process count are the run's
// record, each checked as if typed, and the --set and token are this command's.
Launch plan_launch(const RelaunchOptions& options) {
  for (const std::string& assignment : options.overrides)
    if (assignment.find('=') == std::string::npos)
      fail("--set " + assignment + ": expected key=value");
  if (options.ranks < 0) fail(fmt::format("--ranks {}: expected a number of processes of 1 or more", options.ranks));
  const std::string store_path = fs::absolute(resolve_store_path(options.store)).string();
  const auto db = open_store_for_reading(options.store);
  const store::RunRecord run = store::get_run(*db, store::resolve_run(*db, options.run));
  kiln::check_run_name(run.name);
  Launch launch;
  require_ended(run, options.fork_step.has_value(), launch);
  if (!run.workdir.empty() && !fs::is_directory(run.workdir))
    fail(fmt::format("run {} ('{}') was started in {}, which is gone", run.id, run.name, run.workdir));
  const store::Checkpoint checkpoint = pick_checkpoint(*db, run, options.fork_step);

  launch.workdir = run.workdir.empty() ? fs::current_path().string() : run.workdir;
  const int ranks = options.ranks > 0 ? options.ranks : recorded_ranks(run);
  const std::string folder = checkpoint_folder(run, checkpoint).string();
  launch.argv = {self_path(), "train", with_value("--resume", folder), with_value("--store", store_path)};
  // kiln train starts several ranks itself, under mpirun as this machine needs it.
  if (ranks > 1) launch.argv.push_back(with_value("--ranks", std::to_string(ranks)));
  std::string name = run.name;
  if (options.fork_step) {
    name = options.fork_name.empty() ? free_name(*db, fmt::format("{}-fork-{}", run.name, checkpoint.step))
                                     : options.fork_name;
    kiln::check_run_name(name);
    if (store::find_run_named(*db, name)) fail("a run named '" + name + "' already exists; choose another --name");
  }
  // Named, a resume is that run going on, whatever its --set change (store::ResumeRequest).
  launch.argv.push_back(with_value("--name", name));
  for (const std::string& word : tag_words(run)) launch.argv.push_back(word);
  for (const std::string& word : dashboard_words(run, options, launch)) launch.argv.push_back(word);
  for (const std::string& assignment : options.overrides) launch.argv.push_back(with_value("--set", assignment));
  if (options.detach) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    launch.log_path = (fs::path(folder).parent_path().parent_path() / (name + "-" + stamp + ".log")).string();
  }
  for (const std::string& note : launch.notes) fmt::print("kiln: {}\n", note);
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

void relaunch_run(const RelaunchOptions& options) {
  const Launch launch = plan_launch(options);
  // In the environment, not on the command line, where every user of the machine sees it.
  if (!launch.token.empty() && ::setenv("KILN_TOKEN", launch.token.c_str(), 1) != 0)
    fail(std::string("cannot hand the token on: ") + std::strerror(errno));
  start(launch);
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
