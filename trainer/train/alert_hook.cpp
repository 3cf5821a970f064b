#include "trainer/train/alert_hook.h"

#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/core.h>

extern char** environ;

namespace kiln {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);

// kiln's environment without the secret the dashboard's clients authenticate with.
std::vector<char*> hook_environment() {
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "KILN_TOKEN=", 11) != 0) env.push_back(*e);
  env.push_back(nullptr);
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
  int pid = -1;
  int error = fd < 0 ? errno : 0;
  if (fd >= 0) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fd, STDIN_FILENO);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    // A group of its own, so the timeout kills what the shell started too.
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
    std::vector<char*> env = hook_environment();
    error = posix_spawn(&pid, "/bin/sh", &actions, &attributes, const_cast<char**>(argv), env.data());
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    close(fd);
  }
  if (error != 0) {
    fmt::print(out_, "kiln: warning: alerts.command could not start for {}: {}\n", what, std::strerror(error));
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
