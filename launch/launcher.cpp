#include "monitor/tui/launcher.h"

#include <signal.h>
#include <sys/wait.h>

#include "base/check.h"
#include "base/child_process.h"

namespace kiln::tui {

void Launcher::start(const std::vector<std::string>& argv, const std::string& log_path,
                     const std::string& run_name) {
  ChildCommand child;
  child.argv = argv;
  child.log_path = log_path;
  child.detached = true;
  try {
    processes_[run_name] = Process{start_child(child), log_path, std::nullopt, false};
  } catch (const Error& e) {
    fail(std::string("launch: ") + e.what());
  }
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
