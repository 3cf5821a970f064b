#include "tests/run_command.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace kiln::test {

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

int start_background(const std::string& command, const std::string& log_path) {
  const std::string line = "exec " + command + " >" + log_path + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_exit(int pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string wait_for_url(const std::string& log_path) {
  static const std::regex url("http://[^\\s]+");
  for (int i = 0; i < 300; ++i) {
    std::smatch match;
    const std::string log = read_text(log_path);
    if (std::regex_search(log, match, url)) return match[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

uint16_t port_of(const std::string& url) { return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1))); }

std::string mpirun_command(int ranks) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np " +
         std::to_string(ranks) + " ";
}

namespace {

std::string from_environment(const char* name, const char* built_with) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built_with;
}

}  // namespace

std::string kiln_binary() { return from_environment("KILN_BINARY", KILN_BINARY); }

std::string source_dir() { return from_environment("KILN_SOURCE_DIR", KILN_SOURCE_DIR); }

}  // namespace kiln::test
