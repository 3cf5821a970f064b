#include "launch/supervised_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <thread>

#include <fmt/core.h>

#include "base/check.h"
#include "base/child_process.h"
#include "base/mpi_launch.h"
#include "launch/failure_cause.h"
#include "store/name_lookup.h"
#include "store/rows.h"
#include "store/run_end.h"
#include "store/run_figures.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "store/types.h"

namespace kiln::launch {
namespace {

using Clock = std::chrono::steady_clock;

// A failed host that comes back within this is used again; and two failures in a row do not
// spin.
constexpr auto kRestartPause = std::chrono::seconds(2);
// After an attempt's first error line, how long its launcher may take to end the other ranks
// (one that lost a host may wait on it for minutes) before it is ended: SIGTERM, then SIGKILL.
constexpr auto kEndAfterError = std::chrono::seconds(10);
constexpr auto kKillAfterTerm = std::chrono::seconds(5);
// Once the launcher has exited, how long a rank it could not end (frozen, on a host cut off)
// may hold its output open.
constexpr auto kOutputAfterExit = std::chrono::seconds(1);
// A run record whose attempt began more than this before ours began is not ours to end: rank 0
// stamps it by its own host's clock, and clocks kept by NTP differ by far less.
constexpr auto kClockSlack = std::chrono::duration<double>(60);
constexpr size_t kTailLines = 200;
constexpr size_t kMostLineBytes = 2048;

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_attempt_pid = 0;

void forward_signal(int signal) {
  g_signal = signal;
  if (g_attempt_pid > 0) ::kill(static_cast<pid_t>(g_attempt_pid), signal);
}

// Ctrl-C and SIGTERM reach the attempt (in a process group of its own), for as long as this
// lives; the handlers before come back after.
class SignalForwarding {
 public:
  SignalForwarding() {
    struct sigaction action {};
    action.sa_handler = forward_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalForwarding() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own output is gone: the attempt still runs
    data += n;
    size -= static_cast<size_t>(n);
  }
}

struct Attempt {
  int exit_code = 0;
  double started_at = 0;                  // unix s
  std::deque<std::string> tail;           // its last lines, both streams
  std::optional<int64_t> last_step;       // the newest step it logged
  std::optional<double> training_again;   // a restart's: when its first step was done (unix s)
  std::optional<double> failed_at;        // its first error line (unix s)
};

// One stream of the attempt: what it writes goes on to ours, and its lines to the attempt's.
class Stream {
 public:
  Stream(int in, int out) : in_(in), out_(out) {}
  ~Stream() { close(); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int fd() const { return in_; }
  bool open() const { return in_ >= 0; }
  void close() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  // Reads what is there; false at its end.
  template <typename OnLine>
  bool read(OnLine&& on_line) {
    char buffer[65536];
    const ssize_t n = ::read(in_, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
      if (!partial_.empty()) on_line(partial_);
      partial_.clear();
      return false;
    }
    write_all(out_, buffer, static_cast<size_t>(n));
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] == '\n') {
        on_line(partial_);
        partial_.clear();
      } else if (partial_.size() < kMostLineBytes) {
        partial_ += buffer[i];
      }
    }
    return true;
  }

 private:
  int in_;
  int out_;
  std::string partial_;
};

// Starts argv in a process group of its own, its output through this process, and waits for
// it, ending it after an error line it does not end by itself.
Attempt run_attempt(const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) fail(fmt::format("cannot make a pipe: {}", std::strerror(errno)));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    fail(fmt::format("cannot make a pipe: {}", std::strerror(errno)));
  }
  Stream streams[2] = {{out[0], STDOUT_FILENO}, {err[0], STDERR_FILENO}};
  ChildCommand command;
  command.argv = argv;
  command.stdout_fd = out[1];
  command.stderr_fd = err[1];
  pid_t pid = -1;
  try {
    pid = start_child(command);
  } catch (...) {
    ::close(out[1]);
    ::close(err[1]);
    throw;
  }
  ::close(out[1]);
  ::close(err[1]);
  g_attempt_pid = pid;
  if (g_signal != 0) ::kill(pid, g_signal);  // a signal that came as it started

  Attempt attempt;
  attempt.started_at = store::unix_now();
  const auto on_line = [&](const std::string& line) {
    if (const auto step = step_of_line(line)) {
      attempt.last_step = std::max(attempt.last_step.value_or(0), *step);
      if (!attempt.training_again && line.rfind("kiln: restart ", 0) == 0) attempt.training_again = store::unix_now();
    }
    if (!attempt.failed_at && line.find("kiln: error: ") != std::string::npos) attempt.failed_at = store::unix_now();
    attempt.tail.push_back(line);
    if (attempt.tail.size() > kTailLines) attempt.tail.pop_front();
  };
  std::optional<Clock::time_point> exited, errored, terminated;
  int status = 0;
  for (;;) {
    pollfd fds[2];
    nfds_t count = 0;
    for (Stream& s : streams)
      if (s.open()) fds[count++] = {s.fd(), POLLIN, 0};
    if (count > 0) ::poll(fds, count, 200);
    else std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      Stream& s = fds[i].fd == streams[0].fd() ? streams[0] : streams[1];
      if (!s.read(on_line)) s.close();
    }
    const Clock::time_point now = Clock::now();
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = now;
    if (exited && (count == 0 || now - *exited > kOutputAfterExit)) break;
    if (exited) continue;
    if (attempt.failed_at && !errored) errored = now;
    if (errored && !terminated && now - *errored > kEndAfterError) {
      ::kill(-pid, SIGTERM);
      terminated = now;
    } else if (terminated && now - *terminated > kKillAfterTerm) {
      ::kill(-pid, SIGKILL);
    }
  }
  g_attempt_pid = 0;
  attempt.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return attempt;
}

std::string joined(const std::vector<std::string>& words, const char* between) {
  std::string text;
  for (const std::string& w : words) {
    if (!text.empty()) text += between;
    text += w;
  }
  return text;
}

std::vector<std::string> host_names(const std::vector<Host>& hosts) {
  std::vector<std::string> names;
  for (const Host& h : hosts) names.push_back(h.name);
  return names;
}

// The attempt's command: mpirun across the hosts (or this machine's ranks), or the one
// training process.
std::vector<std::string> attempt_argv(const SupervisedRun& run, const std::vector<Host>& hosts, int ranks,
                                      const std::string& resume, int restart) {
  std::vector<std::string> argv;
  const bool root = ::geteuid() == 0;
  if (!hosts.empty()) {
    const int each = ranks_per_host(ranks, hosts);
    argv = mpirun_words(std::max(ranks, 2), std::max(ranks, 2), root).argv;
    argv[2] = std::to_string(ranks);
    std::string list;
    for (const Host& h : hosts) list += (list.empty() ? "" : ",") + h.name + ":" + std::to_string(each);
    for (const std::string& word : {std::string("--host"), list, std::string("--map-by"), "ppr:" + std::to_string(each) + ":node"})
      argv.push_back(word);
  } else if (ranks > 1) {
    MpirunWords words = mpirun_words(ranks, mpirun_slots(), root);
    argv = std::move(words.argv);
  }
  argv.push_back(run.kiln);
  for (const std::string& word : restart > 0 ? run.restart_args : run.first_args) argv.push_back(word);
  if (restart > 0) {
    argv.push_back("--resume=" + resume);
    // The attempt that failed has ended: the store may still show it running.
    argv.push_back("--force");
    argv.push_back("--restart=" + std::to_string(restart));
  }
  return argv;
}

// A restart as the run's `restart` event says it.
struct Restart {
  int number = 0;
  int of = 0;
  FailureCause cause;
  int64_t from_step = 0;
  std::optional<int64_t> failed_step;  // the newest step the failed attempt logged
  double failed_at = 0;
  std::string hosts;  // where it runs again
};

std::string restart_message(const Restart& r, const std::optional<double>& training_again) {
  std::string message = fmt::format("restart {} of {} after: {}", r.number, r.of, r.cause.cause);
  if (!r.cause.hosts.empty()) message += fmt::format(" (host {})", joined(r.cause.hosts, ", "));
  const int64_t lost = std::max<int64_t>(0, r.failed_step.value_or(r.from_step) - r.from_step);
  message += lost > 0 ? fmt::format("; steps {}-{} lost ({})", r.from_step + 1, *r.failed_step, lost)
                      : std::string("; no logged step lost");
  message += fmt::format("; from the checkpoint of step {}", r.from_step);
  if (!r.hosts.empty()) message += " on " + r.hosts;
  message += training_again ? fmt::format("; training again {:.1f} s after the failure", *training_again - r.failed_at)
                            : std::string("; it failed again before its first step");
  return message;
}

// The run's `restart` event, written beside the training's own records; a store that cannot
// take it costs the restart nothing but the record, said in one line.
void record_restart(const std::string& store_path, const std::string& run_name, const Restart& restart,
                    const std::optional<double>& training_again) {
  const std::string message = restart_message(restart, training_again);
  if (store_path.empty()) return;
  try {
    auto db = store::open_store(store_path, store::Access::ReadWrite);
    store::Transaction tx(*db);
    const int64_t id = store::resolve_run(*db, run_name);
    store::insert_event(*db, id,
                        store::Event{0, training_again.value_or(store::unix_now()), restart.from_step,
                                     std::string(store::event_kind::kRestart), message});
    tx.commit();
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln: warning: the run store could not record the restart: {}\n", e.what());
  }
}

// The attempt's failure in the run's record, where its rank 0 was killed before it recorded one
// (store/run_end.h); a run that never reached the store, or a store that cannot take it, is
// left as it is, the latter said in one line.
void record_failure(const std::string& store_path, const std::string& run_name, const Attempt& attempt,
                    const std::string& cause) {
  if (store_path.empty()) return;
  try {
    auto db = store::open_store(store_path, store::Access::ReadWrite);
    if (const std::optional<int64_t> id = store::find_run_named(*db, run_name))
      store::fail_live_run(*db, *id, attempt.started_at - kClockSlack.count(), cause,
                           attempt.failed_at.value_or(store::unix_now()));
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln: warning: the run store could not record the failure: {}\n", e.what());
  }
}

// The run's goodput as its record reads at the end, when it has one.
void say_goodput(const std::string& store_path, const std::string& run_name, int restarts) {
  if (store_path.empty()) return;
  try {
    auto db = store::open_store(store_path, store::Access::ReadOnly);
    const store::RunRecord record = store::get_run(*db, store::resolve_run(*db, run_name));
    if (const auto g = store::goodput(record, store::unix_now()))
      fmt::print("kiln: goodput {:.1f}%: {:.1f} s of steps that count, {} restart{}\n", *g * 100,
                 record.step_seconds.value_or(0), restarts, restarts == 1 ? "" : "s");
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln: warning: cannot read the run's goodput: {}\n", e.what());
  }
}

}  // namespace

std::optional<int64_t> step_of_line(const std::string& line) {
  size_t at = 0;
  if (line.rfind("step ", 0) == 0) at = 5;
  else if (line.rfind("kiln: restart ", 0) == 0 && line.find(": training again at step ") != std::string::npos)
    at = line.find(": training again at step ") + 25;
  else return std::nullopt;
  while (at < line.size() && line[at] == ' ') ++at;
  const size_t digits = at;
  int64_t step = 0;
  while (at < line.size() && line[at] >= '0' && line[at] <= '9' && at - digits < 15) step = step * 10 + (line[at++] - '0');
  if (at == digits) return std::nullopt;
  if (line.rfind("step ", 0) == 0 && (at == line.size() || line[at] != '/')) return std::nullopt;
  return step;
}

int supervise_run(const SupervisedRun& run) {
  KILN_CHECK(run.max_restarts >= 0 && run.ranks >= 1, "supervise_run: ranks >= 1, max_restarts >= 0");
  SignalForwarding forwarding;
  std::vector<Host> hosts = run.hosts;
  int ranks = run.ranks;
  std::string resume;  // a restart's checkpoint
  std::optional<Restart> restart;
  const std::optional<RestartPoint> started_from = run.newest_checkpoint();
  for (int number = 0;; ++number) {
    std::string where = hosts.empty() ? std::string() : joined(host_names(hosts), ", ");
    if (restart) {
      restart->hosts = fmt::format("{} rank{}{}", ranks, ranks == 1 ? "" : "s", where.empty() ? "" : " on " + where);
      fmt::print("kiln: restart {} of {}: from {} (step {}) as {}\n", restart->number, restart->of, resume,
                 restart->from_step, restart->hosts);
      std::fflush(stdout);
    }
    const Attempt attempt = run_attempt(attempt_argv(run, hosts, ranks, resume, number));
    if (restart) record_restart(run.store_path, run.run_name, *restart, attempt.training_again);
    if (attempt.exit_code == 0 || g_signal != 0) {
      say_goodput(run.store_path, run.run_name, number);
      return attempt.exit_code;
    }
    FailureCause cause = failure_cause({attempt.tail.begin(), attempt.tail.end()},
                                       hosts.empty() ? std::vector<std::string>{} : host_names(hosts), attempt.exit_code);
    record_failure(run.store_path, run.run_name, attempt, cause.cause);
    const auto stop = [&](const std::string& why) {
      fmt::print(stderr, "kiln: the run failed ({}); {}\n", cause.cause, why);
      say_goodput(run.store_path, run.run_name, number);
      return attempt.exit_code;
    };
    const std::optional<RestartPoint> point = run.newest_checkpoint();
    const bool trained = attempt.last_step || (point && (!started_from || point->step > started_from->step));
    if (number == 0 && !trained)
      return stop("not restarting it, since it failed before its first step and would fail the same way");
    if (number == run.max_restarts)
      return stop(run.max_restarts == 0 ? std::string("not restarting it (--max-restarts 0)")
                                        : fmt::format("--max-restarts {} used up", run.max_restarts));
    if (!point) return stop("no checkpoint to restart from: train.checkpoint_interval writes them");
    if (run.exclude_failed && !cause.hosts.empty()) {
      std::vector<Host> left;
      for (const Host& h : hosts)
        if (std::find(cause.hosts.begin(), cause.hosts.end(), h.name) == cause.hosts.end()) left.push_back(h);
      const int left_ranks = ranks / static_cast<int>(hosts.size()) * static_cast<int>(left.size());
      if (left.empty()) return stop("--exclude-failed leaves no host");
      if (const std::string why = run.layout_refusal(left_ranks); !why.empty())
        return stop(fmt::format("--exclude-failed cannot leave out {}: {} ranks would be left, and {}",
                                joined(cause.hosts, ", "), left_ranks, why));
      hosts = std::move(left);
      ranks = left_ranks;
    }
    restart = Restart{number + 1,         run.max_restarts, cause, point->step, attempt.last_step,
                      attempt.failed_at.value_or(store::unix_now()), {}};
    resume = point->checkpoint;
    fmt::print(stderr, "kiln: the run failed ({}); restarting it in {} s\n", cause.cause,
               std::chrono::seconds(kRestartPause).count());
    std::fflush(stderr);
    std::this_thread::sleep_for(kRestartPause);
    if (g_signal != 0) return attempt.exit_code;
  }
}

}  // namespace kiln::launch
