#include "launch/launcher.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace kiln::launch {

pid_t Launcher::start(const std::string& run_name, const ChildCommand& command) {
  const pid_t pid = start_child(command);
  const auto same = [&](const Process& p) { return p.run_name == run_name; };
  processes_.erase(std::remove_if(processes_.begin(), processes_.end(), same), processes_.end());
  processes_.push_back(Process{run_name, pid, command.log_path, std::nullopt, false});
  return pid;
}

std::vector<std::string> Launcher::reap() {
  std::vector<std::string> ended;
  for (Process& p : processes_) {
    if (p.exit_code) continue;
    int status = 0;
    const pid_t done = ::waitpid(p.pid, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) continue;
    if (done > 0 && WIFEXITED(status)) p.exit_code = WEXITSTATUS(status);
    else if (done > 0 && WIFSIGNALED(status)) p.exit_code = 128 + WTERMSIG(status);
    else p.exit_code = 1;  // no status to be had
    ended.push_back(p.run_name);
  }
  return ended;
}

const Launcher::Process* Launcher::find(const std::string& run_name) const {
  const auto it = std::find_if(processes_.begin(), processes_.end(),
                               [&](const Process& p) { return p.run_name == run_name; });
  return it == processes_.end() ? nullptr : &*it;
}

Launcher::Process* Launcher::find(const std::string& run_name) {
  return const_cast<Process*>(std::as_const(*this).find(run_name));
}

bool Launcher::running(const std::string& run_name) const {
  const Process* p = find(run_name);
  return p != nullptr && !p->exit_code;
}

size_t Launcher::running_count() const {
  return static_cast<size_t>(
      std::count_if(processes_.begin(), processes_.end(), [](const Process& p) { return !p.exit_code; }));
}

std::optional<int> Launcher::exit_code(const std::string& run_name) const {
  const Process* p = find(run_name);
  return p == nullptr ? std::nullopt : p->exit_code;
}

std::string Launcher::log_path(const std::string& run_name) const {
  const Process* p = find(run_name);
  return p == nullptr ? "" : p->log_path;
}

bool Launcher::kill(const std::string& run_name) {
  Process* p = find(run_name);
  if (p == nullptr || p->exit_code) return false;
  // setsid made the child a group leader: the group holds mpirun and every rank.
  ::kill(-p->pid, p->terminated ? SIGKILL : SIGTERM);
  p->terminated = true;
  return true;
}

void Launcher::stop_all() {
  for (Process& p : processes_) {
    if (p.exit_code) continue;
    ::kill(p.pid, SIGTERM);
    p.terminated = true;
  }
}

}  // namespace kiln::launch
