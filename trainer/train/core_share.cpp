#include "trainer/train/core_share.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "base/check.h"
#include "base/private_files.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// When the process `pid` started (clock ticks after boot, /proc/PID/stat's 22nd field), or ""
// when no such process runs. With the id it names one process: ids are reused.
std::string start_time(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  std::getline(in, stat);
  // The command name (field 2) is in parentheses and may hold spaces or ')': count after the last.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return "";
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) return field;
  return "";
}

// An entry names a run while the process that registered it runs: the entry holds its start
// time, and its name its id.
bool live_run(const fs::path& entry) {
  const std::string name = entry.filename().string();
  const std::string pid = name.substr(0, name.find('.'));
  int value = 0;
  const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), value);
  if (ec != std::errc() || end != pid.data() + pid.size() || value <= 0) return false;
  std::string started;
  try {
    started = read_small_file(entry.string(), 64, false, "core share entry");
  } catch (const Error&) {
    return false;
  }
  return !started.empty() && started == start_time(pid);
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
    : registry_(registry),
      cores_(std::max(1, cores)),
      at_least_(std::max(1, at_least)),
      notice_(std::max(1, cores_ / at_least_)) {
  make_registry(registry_);
  // One entry per registration: a process holds at most a few, told apart by a serial.
  static std::atomic<int> serial{0};
  const std::string name = std::to_string(::getpid()) + "." + std::to_string(serial++);
  entry_ = (fs::path(registry_) / name).string();
  const std::string started = start_time(std::to_string(::getpid()));
  // Written beside the registry and renamed into it whole: another run's count never reads
  // an entry before its start time is in it (and removes it as no run's).
  const std::string staged = (fs::path(registry_).parent_path() / ("cpu-run-" + name)).string();
  try {
    std::error_code ignored;
    fs::remove(staged, ignored);  // left by an earlier process with this id
    const int fd = create_private_file(staged);
    const bool written = ::write(fd, started.data(), started.size()) == static_cast<ssize_t>(started.size());
    ::close(fd);
    std::error_code renamed;
    if (written && !started.empty()) fs::rename(staged, entry_, renamed);
    if (!written || started.empty() || renamed) {
      fs::remove(staged, ignored);
      fail("cannot write " + entry_);
    }
  } catch (const Error& e) {
    fail("core share: cannot register in " + registry_ + ": " + e.what());
  }
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
    if (live_run(entry.path())) {
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

bool CoreShare::say_share(ShareNotice::Clock::time_point now) { return notice_.due(threads(), now); }

bool ShareNotice::due(int threads, Clock::time_point now) {
  if (threads != seen_) {
    seen_ = threads;
    seen_since_ = now;
  }
  const bool first = std::exchange(first_, false);
  if (seen_ == said_) return false;
  const bool lasting = first || now - seen_since_ >= kLasting;
  if (!lasting || (said_at_ && now - *said_at_ < kEvery)) return false;
  said_ = seen_;
  said_at_ = now;
  return true;
}

}  // namespace kiln
