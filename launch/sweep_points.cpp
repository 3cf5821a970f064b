#include "cli/sweep_launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/core.h>

#include "base/check.h"
#include "base/child_process.h"

extern char** environ;

namespace kiln {
namespace {

volatile sig_atomic_t stop_requested = 0;

void request_stop(int) { stop_requested = 1; }

// The sweep's SIGINT and SIGTERM handlers while it launches, and the previous ones after.
class StopSignals {
 public:
  StopSignals() {
    stop_requested = 0;
    struct sigaction action {};
    action.sa_handler = request_stop;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

// This environment with CUDA_VISIBLE_DEVICES set to `devices` (unchanged when empty).
std::vector<std::string> child_environment(const std::string& devices) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (devices.empty() || std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env.emplace_back(*e);
  if (!devices.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + devices);
  return env;
}

pid_t spawn(const SweepTask& task, const SweepSlots& slots, const std::string& devices, const std::string& self) {
  ChildCommand child;
  child.argv = {self, "train"};
  child.argv.insert(child.argv.end(), task.train_args.begin(), task.train_args.end());
  // kiln train starts its ranks itself, under mpirun as this machine needs it.
  if (slots.ranks > 1) child.argv.insert(child.argv.end(), {"--ranks", std::to_string(slots.ranks)});
  child.environment = child_environment(devices);
  child.log_path = task.log_path;
  // A process group of its own (not detached): the terminal's Ctrl-C reaches the sweep, which
  // forwards one SIGTERM (a second signal would end a training at once, without its
  // checkpoint), and the sweep waits for it.
  try {
    return start_child(child);
  } catch (const Error& e) {
    fail(fmt::format("sweep: point {}: {}", task.point, e.what()));
  }
}

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct Running {
  pid_t pid = 0;
  size_t task = 0;
  int slot = 0;
};

}  // namespace

std::vector<std::string> split_devices(int gpus, int parallel) {
  if (parallel > gpus)
    fail(fmt::format("sweep: --parallel {} needs a GPU for each point at a time, and {} {} visible; give --parallel {} or less",
                     parallel, gpus, gpus == 1 ? "is" : "are", std::max(gpus, 1)));
  std::vector<std::string> ids;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && *visible != '\0') {
    std::string id;
    for (const char* c = visible;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!id.empty()) ids.push_back(id);
        id.clear();
        if (*c == '\0') break;
      } else {
        id += *c;
      }
    }
  }
  ids.resize(static_cast<size_t>(gpus));
  for (int g = 0; g < gpus; ++g)
    if (ids[static_cast<size_t>(g)].empty()) ids[static_cast<size_t>(g)] = std::to_string(g);
  std::vector<std::string> slots(static_cast<size_t>(parallel));
  for (int g = 0; g < gpus; ++g) {
    std::string& list = slots[static_cast<size_t>(static_cast<int64_t>(g) * parallel / gpus)];
    if (!list.empty()) list += ',';
    list += ids[static_cast<size_t>(g)];
  }
  return slots;
}

SweepOutcome run_sweep_tasks(const std::vector<SweepTask>& tasks, const SweepSlots& slots,
                             const std::function<void(const SweepTask&)>& launching,
                             const std::function<void(const SweepTask&, int exit_status)>& finished) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  StopSignals signals;
  SweepOutcome outcome;
  std::vector<Running> running;
  std::vector<bool> slot_busy(static_cast<size_t>(slots.parallel), false);
  size_t next = 0;
  bool forwarded = false;
  while ((!stop_requested && next < tasks.size()) || !running.empty()) {
    if (stop_requested && !forwarded) {
      outcome.interrupted = forwarded = true;
      for (const Running& r : running) ::kill(r.pid, SIGTERM);
    }
    while (!stop_requested && next < tasks.size() && running.size() < static_cast<size_t>(slots.parallel)) {
      int slot = 0;
      while (slot_busy[static_cast<size_t>(slot)]) ++slot;
      const SweepTask& task = tasks[next];
      launching(task);
      const std::string devices = slots.devices.empty() ? "" : slots.devices[static_cast<size_t>(slot)];
      running.push_back({spawn(task, slots, devices, self), next++, slot});
      slot_busy[static_cast<size_t>(slot)] = true;
      ++outcome.launched;
    }
    bool reaped = false;
    for (size_t i = 0; i < running.size();) {
      int status = 0;
      const pid_t done = ::waitpid(running[i].pid, &status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) {
        ++i;
        continue;
      }
      slot_busy[static_cast<size_t>(running[i].slot)] = false;
      finished(tasks[running[i].task], done < 0 ? 1 : exit_status(status));
      ++outcome.finished;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      reaped = true;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  outcome.interrupted = outcome.interrupted || stop_requested;
  return outcome;
}

}  // namespace kiln
