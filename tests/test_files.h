// The files a test makes and reads back: a fresh folder of its own, a file's text and its
// permission bits.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace kiln::test {

// The folders this process made, removed as it exits when every test it ran passed: a suite
// run leaves nothing behind (a full run made some GB of corpora, checkpoints and stores), and
// a failed test's folder stays for a look, its path in the failure's messages.
struct MadeFolders {
  std::vector<std::filesystem::path> paths;
  ~MadeFolders() {
    if (!testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ec;  // a background process may still be writing: what stays, stays
    for (const std::filesystem::path& p : paths) std::filesystem::remove_all(p, ec);
  }
};

inline MadeFolders& made_folders() {
  static MadeFolders folders;
  return folders;
}

// An empty folder under the test temp dir. The pid keeps apart the processes ctest runs side
// by side, each running one test of a suite whose set-up prepares the same-named folder.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / ("kiln_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  made_folders().paths.push_back(dir);
  return dir.string();
}

inline std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The permission bits of `path` itself (a link's own, not its target's).
inline mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

}  // namespace kiln::test
