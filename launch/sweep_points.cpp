#include "launch/sweep_points.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/core.h>

#include "base/check.h"
#include "launch/launcher.h"
#include "launch/train_command.h"

extern char** environ;

namespace kiln::launch {
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

// A process group of its own (not detached): the terminal's Ctrl-C reaches the sweep, which
// forwards one SIGTERM (Launcher::stop_all), and the sweep waits for it.
TrainCommand point_command(const std::string& kiln, const SweepTask& task, const SweepSlots& slots,
                           const std::string& devices) {
  return {kiln, task.train_args, slots.ranks, task.log_path, false, child_environment(devices)};
}

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

SweepOutcome run_sweep_tasks(const std::string& kiln, const std::vector<SweepTask>& tasks, const SweepSlots& slots,
                             const std::function<void(const SweepTask&)>& launching,
                             const std::function<void(const SweepTask&, int exit_status)>& finished) {
  StopSignals signals;
  SweepOutcome outcome;
  Launcher launcher;
  std::vector<size_t> running;  // the tasks launched and not yet ended, in launch order
  std::vector<int> slot_of(tasks.size(), 0);
  std::vector<bool> slot_busy(static_cast<size_t>(slots.parallel), false);
  size_t next = 0;
  bool forwarded = false;
  while ((!stop_requested && next < tasks.size()) || !running.empty()) {
    if (stop_requested && !forwarded) {
      outcome.interrupted = forwarded = true;
      launcher.stop_all();
    }
    while (!stop_requested && next < tasks.size() && running.size() < static_cast<size_t>(slots.parallel)) {
      int slot = 0;
      while (slot_busy[static_cast<size_t>(slot)]) ++slot;
      const SweepTask& task = tasks[next];
      launching(task);
      const std::string devices = slots.devices.empty() ? "" : slots.devices[static_cast<size_t>(slot)];
      try {
        launcher.start(task.run_name, train_child(point_command(kiln, task, slots, devices)));
      } catch (const Error& e) {
        fail(fmt::format("sweep: point {}: {}", task.point, e.what()));
      }
      running.push_back(next);
      slot_of[next++] = slot;
      slot_busy[static_cast<size_t>(slot)] = true;
      ++outcome.launched;
    }
    const std::vector<std::string> ended = launcher.reap();
    for (const std::string& run_name : ended) {
      const auto at = std::find_if(running.begin(), running.end(),
                                   [&](size_t t) { return tasks[t].run_name == run_name; });
      const size_t t = *at;
      running.erase(at);
      slot_busy[static_cast<size_t>(slot_of[t])] = false;
      finished(tasks[t], *launcher.exit_code(run_name));
      ++outcome.finished;
    }
    if (ended.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  outcome.interrupted = outcome.interrupted || stop_requested;
  return outcome;
}

}  // namespace kiln::launch
