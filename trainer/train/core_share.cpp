#include "trainer/train/core_share.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/check.h"
#include "base/private_files.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string command_name(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// A process id that is still running this program: pids are reused, so a live pid that now
// runs something else is a run that ended.
bool runs_kiln(const std::string& pid) {
  int value = 0;
  const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), value);
  if (ec != std::errc() || end != pid.data() + pid.size() || value <= 0) return false;
  if (::kill(value, 0) != 0 && errno != EPERM) return false;
  static const std::string own = command_name("self");
  return command_name(pid) == own;
}

// Makes the registry (and its parent) folders only this user can write, or fails: another
// user's folder, or a link planted where it should be, could count runs that are not ours or
// point our files elsewhere.
void make_registry(const fs::path& path) {
  try {
    make_private_folder(path.parent_path().string());
    make_private_folder(path.string());
  } catch (const Error& e) {
    fail(std::string("core share: ") + e.what());
  }
}

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string cpu_run_registry() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && *runtime != '\0') return (fs::path(runtime) / "kiln" / "cpu-runs").string();
  return "/tmp/kiln-" + std::to_string(::getuid()) + "/cpu-runs";
}

CoreShare::CoreShare(const std::string& registry, int cores, int at_least)
    : registry_(registry), cores_(std::max(1, cores)), at_least_(std::max(1, at_least)) {
  make_registry(registry_);
  // One entry per registration: a process holds at most a few, told apart by a serial.
  static std::atomic<int> serial{0};
  entry_ = (fs::path(registry_) / (std::to_string(::getpid()) + "." + std::to_string(serial++))).string();
  std::ofstream(entry_).flush();
  if (!fs::exists(entry_)) fail("core share: cannot register in " + registry_);
  recount();
}

CoreShare::~CoreShare() {
  std::error_code ignored;
  fs::remove(entry_, ignored);
}

int CoreShare::threads() {
  if (std::chrono::steady_clock::now() - counted_ >= std::chrono::seconds(1)) return recount();
  return std::max(1, cores_ / runs_);
}

int CoreShare::recount() {
  int live = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(registry_, ec)) {
    const std::string name = entry.path().filename().string();
    if (runs_kiln(name.substr(0, name.find('.')))) {
      ++live;
    } else {
      std::error_code ignored;
      fs::remove(entry.path(), ignored);
    }
  }
  runs_ = std::max(live, at_least_);
  counted_ = std::chrono::steady_clock::now();
  return std::max(1, cores_ / runs_);
}

}  // namespace kiln
