#include "cli/rank_launch.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "base/check.h"
#include "base/child_process.h"
#include "base/mpi_launch.h"
#include "trainer/parallel/launch.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The program's path in PATH, as execvp would find it; "" when none is there.
std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string folders = path != nullptr ? path : "";
  size_t start = 0;
  while (start <= folders.size()) {
    const size_t end = std::min(folders.find(':', start), folders.size());
    const std::string folder = end > start ? folders.substr(start, end - start) : ".";
    const std::string candidate = folder + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace

std::vector<std::string> own_arguments_less(std::initializer_list<std::string_view> options,
                                            std::initializer_list<std::string_view> flags) {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  std::vector<std::string> words;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\0', start);
    words.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  KILN_CHECK(!words.empty(), "cannot read this process's arguments from /proc/self/cmdline");
  std::vector<std::string> kept;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string_view word = words[i];
    const auto given = [&](std::string_view option) {
      return word == option || (word.size() > option.size() && word.substr(0, option.size()) == option &&
                                word[option.size()] == '=');
    };
    if (std::any_of(flags.begin(), flags.end(), given)) continue;
    if (std::none_of(options.begin(), options.end(), given)) kept.push_back(words[i]);
    else if (word.find('=') == std::string_view::npos) ++i;  // and its value
  }
  return kept;
}

void start_ranks(int ranks) {
  if (ranks < 1) fail(fmt::format("--ranks {}: expected a number of processes of 1 or more", ranks));
  if (launched_by_mpi())
    fail(fmt::format("--ranks {} starts mpirun itself, and this process is already one of {} an MPI launcher "
                     "started; drop --ranks, or drop the launcher (kiln train --ranks N alone)",
                     ranks, launched_world_size()));
  if (ranks == 1) return;
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty())
    fail(fmt::format("--ranks {} needs Open MPI's mpirun, which is not on the PATH; install it (Debian: apt install "
                     "openmpi-bin) or train as 1 rank",
                     ranks));
  MpirunWords words = mpirun_words(ranks, mpirun_slots(), ::geteuid() == 0);
  if (!words.note.empty()) fmt::print("kiln: {}\n", words.note);
  std::fflush(stdout);
  words.argv.front() = mpirun;
  words.argv.push_back(fs::read_symlink("/proc/self/exe").string());
  for (std::string& word : own_arguments_less({"--ranks"})) words.argv.push_back(std::move(word));

  std::vector<char*> argv;
  for (std::string& word : words.argv) argv.push_back(word.data());
  argv.push_back(nullptr);
  // mpirun takes this process's place (its pid, its terminal, its exit status), holding
  // nothing of kiln's but the standard streams.
  close_all_but_standard_streams();
  ::execv(argv[0], argv.data());
  fail(fmt::format("--ranks {}: cannot start {}: {}", ranks, mpirun, std::strerror(errno)));
}

}  // namespace kiln
