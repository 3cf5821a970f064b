#include "trainer/train/alert_hook.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "base/check.h"
#include "base/child_process.h"

extern char** environ;

namespace kiln {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);

// kiln's environment without the secret the dashboard's clients authenticate with.
std::vector<std::string> hook_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "KILN_TOKEN=", 11) != 0) env.emplace_back(*e);
  return env;
}

// The input as an in-memory file read from its start: the hook reads it at its own pace and
// kiln never blocks on a pipe, nor dies of SIGPIPE when the hook does not read at all.
int input_file(const std::string& input) {
  const int fd = memfd_create("kiln-alert", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t written = 0;
  while (written < input.size()) {
    const ssize_t n = write(fd, input.data() + written, input.size() - written);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    written += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

}  // namespace

AlertHook::AlertHook(std::string command, double timeout_s, std::FILE* out)
    : command_(std::move(command)), timeout_s_(timeout_s), out_(out) {}

AlertHook::~AlertHook() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return in_flight_ == 0; });
}

bool AlertHook::run(const std::string& input, const std::string& what) {
  {
    std::lock_guard lock(mutex_);
    if (in_flight_ >= kMaxInFlight) {
      fmt::print(out_, "kiln: warning: alerts.command not run for {}: {} hooks still running\n", what, in_flight_);
      std::fflush(out_);
      return false;
    }
  }
  const int fd = input_file(input);
  pid_t pid = -1;
  std::string error = fd < 0 ? std::strerror(errno) : "";
  if (fd >= 0) {
    ChildCommand hook;
    hook.argv = {"/bin/sh", "-c", command_};
    hook.environment = hook_environment();
    hook.stdin_fd = fd;
    try {
      pid = start_child(hook);
    } catch (const Error& e) {
      error = e.what();
    }
    close(fd);
  }
  if (pid < 0) {
    fmt::print(out_, "kiln: warning: alerts.command could not start for {}: {}\n", what, error);
    std::fflush(out_);
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  std::thread([this, pid, what] { watch(pid, what); }).detach();
  return true;
}

void AlertHook::watch(int pid, std::string what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  int status = 0;
  bool killed = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      killed = true;
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  if (killed)
    fmt::print(out_, "kiln: warning: alerts.command for {} killed after {:g} s (alerts.command_timeout_s)\n", what,
               timeout_s_);
  else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    fmt::print(out_, "kiln: warning: alerts.command for {} exited with status {}\n", what, WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    fmt::print(out_, "kiln: warning: alerts.command for {} ended by signal {}\n", what, WTERMSIG(status));
  std::fflush(out_);
  // The last touch of this object: the destructor may return as soon as the lock is free.
  std::lock_guard lock(mutex_);
  --in_flight_;
  done_.notify_all();
}

}  // namespace kiln
