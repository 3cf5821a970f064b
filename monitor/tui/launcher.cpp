#include "monitor/tui/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store/error.h"

namespace kiln::tui {

void Launcher::start(const std::vector<std::string>& argv, const std::string& log_path,
                     const std::string& run_name) {
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) store::fail("launch: cannot write the log " + log_path + ": " + std::strerror(errno));
  // A pipe closed on exec tells the parent whether exec worked: an error number arrives
  // only when it failed.
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) store::fail(std::string("launch: pipe: ") + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) store::fail(std::string("launch: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setsid();
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execvp(args[0], args.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t n = ::write(status_pipe[1], &error, sizeof error);
    ::_exit(127);
  }
  ::close(log);
  ::close(status_pipe[1]);
  int error = 0;
  const ssize_t n = ::read(status_pipe[0], &error, sizeof error);
  ::close(status_pipe[0]);
  if (n == sizeof error) {
    ::waitpid(pid, nullptr, 0);
    store::fail("launch: cannot start " + argv[0] + ": " + std::strerror(error));
  }
  processes_[run_name] = Process{pid, log_path, std::nullopt, false};
}

void Launcher::reap() {
  for (auto& [name, p] : processes_) {
    if (p.exit_code) continue;
    int status = 0;
    if (::waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
    p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

bool Launcher::running(const std::string& run_name) const {
  const auto it = processes_.find(run_name);
  return it != processes_.end() && !it->second.exit_code;
}

std::optional<int> Launcher::exit_code(const std::string& run_name) const {
  const auto it = processes_.find(run_name);
  return it == processes_.end() ? std::nullopt : it->second.exit_code;
}

std::string Launcher::log_path(const std::string& run_name) const {
  const auto it = processes_.find(run_name);
  return it == processes_.end() ? "" : it->second.log_path;
}

bool Launcher::kill(const std::string& run_name) {
  const auto it = processes_.find(run_name);
  if (it == processes_.end() || it->second.exit_code) return false;
  // setsid made the child a group leader: the group holds mpirun and every rank.
  ::kill(-it->second.pid, it->second.terminated ? SIGKILL : SIGTERM);
  it->second.terminated = true;
  return true;
}

}  // namespace kiln::tui
