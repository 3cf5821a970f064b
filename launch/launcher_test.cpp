#include "monitor/tui/launcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "base/check.h"

namespace kiln::tui {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_tui_launcher_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<int> wait_for_exit(Launcher& launcher, const std::string& run) {
  for (int i = 0; i < 500 && launcher.running(run); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    launcher.reap();
  }
  return launcher.exit_code(run);
}

TEST(Launcher, ARunGetsItsOwnSessionItsLogAndNoDescriptorOfTheUi) {
  const std::string dir = fresh_dir("session");
  Launcher launcher;
  launcher.start({"sh", "-c", "ls /proc/$$/fd; cut -d' ' -f6 /proc/$$/stat; echo $$"}, dir + "/train.log",
                 "run");
  EXPECT_TRUE(launcher.launched("run"));
  EXPECT_EQ(wait_for_exit(launcher, "run"), 0);
  std::istringstream lines(read_text(dir + "/train.log"));
  std::string fds, sid, pid;
  for (int i = 0; i < 3; ++i) {
    std::string fd;
    std::getline(lines, fd);
    fds += fd + " ";
  }
  std::getline(lines, sid);
  std::getline(lines, pid);
  EXPECT_EQ(fds, "0 1 2 ");
  EXPECT_EQ(sid, pid) << "the run leads a session of its own";
  EXPECT_EQ(launcher.log_path("run"), dir + "/train.log");
}

TEST(Launcher, ALogThatIsAPlantedLinkIsRefused) {
  const std::string dir = fresh_dir("planted");
  std::ofstream(dir + "/elsewhere") << "someone else's\n";
  fs::create_symlink(dir + "/elsewhere", dir + "/train.log");
  Launcher launcher;
  try {
    launcher.start({"sh", "-c", "echo written"}, dir + "/train.log", "run");
    ADD_FAILURE() << "the link was followed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "launch: log " + dir + "/train.log is a symbolic link; kiln does not follow it");
  }
  EXPECT_FALSE(launcher.launched("run"));
  EXPECT_EQ(read_text(dir + "/elsewhere"), "someone else's\n");
}

TEST(Launcher, AProgramThatCannotStartIsOneLine) {
  const std::string dir = fresh_dir("missing");
  Launcher launcher;
  try {
    launcher.start({"kiln-no-such-program"}, dir + "/train.log", "run");
    ADD_FAILURE() << "started";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "launch: cannot start kiln-no-such-program: No such file or directory");
  }
  EXPECT_FALSE(launcher.launched("run"));
}

}  // namespace
}  // namespace kiln::tui
