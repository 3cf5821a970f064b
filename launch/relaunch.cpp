#include "launch/relaunch.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/core.h>

#include "base/check.h"
#include "base/child_process.h"
#include "base/human_format.h"
#include "base/run_names.h"
#include "store/run_figures.h"
#include "store/run_queries.h"
#include "store/user_text.h"

namespace kiln::launch {
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

// A name for the fork nobody has: NAME, or NAME-2, NAME-3, ...
std::string free_name(store::Database& db, const std::string& name) {
  for (int n = 1; n <= 1000; ++n) {
    const std::string candidate = n == 1 ? name : fmt::format("{}-{}", name, n);
    if (!store::find_run_named(db, candidate)) return candidate;
  }
  fail("no free run name like '" + name + "'; give --name");
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

// A live-looking run whose process is gone (killed on this host) starts again like any ended
// one, said in a note; a run whose process lives, or that runs on another host, is refused.
void require_ended(const store::RunRecord& run, bool fork, const std::string& host, Relaunch& relaunch) {
  if (!store::is_live(run.status)) return;
  if (store::recorder_gone(run, host)) {
    relaunch.notes.push_back(fmt::format("run {} ('{}') reads as {}, but its process {} on {} is gone (killed, or "
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

}  // namespace

std::string with_value(std::string_view option, const std::string& value) {
  return fmt::format("{}={}", option, value);
}

// The config is the checkpoint's, the tags, dashboard and process count are the run's
// record, each checked as if typed, and the overrides and token are this request's.
Relaunch plan_relaunch(store::Database& db, const RelaunchRequest& request, const DashboardWords& dashboard) {
  Relaunch relaunch;
  relaunch.run = store::get_run(db, store::resolve_run(db, request.run));
  const store::RunRecord& run = relaunch.run;
  kiln::check_run_name(run.name);
  require_ended(run, request.fork_step.has_value(), request.host, relaunch);
  if (!run.workdir.empty() && !fs::is_directory(run.workdir))
    fail(fmt::format("run {} ('{}') was started in {}, which is gone", run.id, run.name, run.workdir));
  const store::Checkpoint checkpoint = pick_checkpoint(db, run, request.fork_step);
  relaunch.step = checkpoint.step;

  relaunch.workdir = run.workdir.empty() ? fs::current_path().string() : run.workdir;
  relaunch.ranks = request.ranks > 0 ? request.ranks : recorded_ranks(run);
  relaunch.checkpoint = checkpoint_folder(run, checkpoint).string();
  std::vector<std::string>& args = relaunch.command.args;
  args = {with_value("--resume", relaunch.checkpoint), with_value("--store", request.store_path)};
  // kiln train starts several ranks itself, under mpirun as this machine needs it.
  if (relaunch.ranks > 1) args.push_back(with_value("--ranks", std::to_string(relaunch.ranks)));
  std::string name = run.name;
  if (request.fork_step) {
    name = request.fork_name.empty() ? free_name(db, fmt::format("{}-fork-{}", run.name, checkpoint.step))
                                     : request.fork_name;
    kiln::check_run_name(name);
    if (store::find_run_named(db, name)) fail("a run named '" + name + "' already exists; choose another --name");
  }
  // Named, a resume is that run going on, whatever its overrides (store::ResumeRequest).
  args.push_back(with_value("--name", name));
  for (const std::string& word : tag_words(run)) args.push_back(word);
  for (const std::string& word : dashboard(run, relaunch)) args.push_back(word);
  for (const std::string& assignment : request.overrides) args.push_back(with_value("--set", assignment));
  relaunch.command.kiln = this_kiln();
  if (request.detach) {
    const std::string stamp = local_time_text(static_cast<double>(std::time(nullptr)), "%Y%m%d-%H%M%S");
    relaunch.command.log_path =
        (fs::path(relaunch.checkpoint).parent_path().parent_path() / (name + "-" + stamp + ".log")).string();
  }
  return relaunch;
}

pid_t start_relaunch(const Relaunch& relaunch) {
  if (!relaunch.token.empty() && ::setenv("KILN_TOKEN", relaunch.token.c_str(), 1) != 0)
    fail(std::string("cannot hand the token on: ") + std::strerror(errno));
  if (::chdir(relaunch.workdir.c_str()) != 0)
    fail("cannot enter " + relaunch.workdir + ": " + std::strerror(errno));
  std::fflush(stdout);
  const ChildCommand child = train_child(relaunch.command);
  if (relaunch.command.log_path.empty()) {
    // The run takes this process's place, with nothing open of kiln's but its terminal.
    close_all_but_standard_streams();
    exec(child.argv);
  }
  // Its own session, so the terminal's Ctrl-C and hang-up leave it running.
  return start_child(child);
}

}  // namespace kiln::launch
