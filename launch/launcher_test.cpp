#include "launch/launcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/check.h"
#include "tests/test_files.h"

namespace kiln::launch {
namespace {

namespace fs = std::filesystem;

using kiln::test::fresh_dir;
using kiln::test::text_of;

// A detached command, as the terminal UI starts its runs.
ChildCommand detached(std::vector<std::string> argv, const std::string& log_path) {
  ChildCommand command;
  command.argv = std::move(argv);
  command.log_path = log_path;
  command.detached = true;
  return command;
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
  launcher.start("run", detached({"sh", "-c", "ls /proc/$$/fd; cut -d' ' -f6 /proc/$$/stat; echo $$"},
                                 dir + "/train.log"));
  EXPECT_TRUE(launcher.launched("run"));
  EXPECT_EQ(wait_for_exit(launcher, "run"), 0);
  std::istringstream lines(text_of(dir + "/train.log"));
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
    launcher.start("run", detached({"sh", "-c", "echo written"}, dir + "/train.log"));
    ADD_FAILURE() << "the link was followed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "log " + dir + "/train.log is a symbolic link; kiln does not follow it");
  }
  EXPECT_FALSE(launcher.launched("run"));
  EXPECT_EQ(text_of(dir + "/elsewhere"), "someone else's\n");
}

TEST(Launcher, AProgramThatCannotStartIsOneLine) {
  const std::string dir = fresh_dir("missing");
  Launcher launcher;
  try {
    launcher.start("run", detached({"kiln-no-such-program"}, dir + "/train.log"));
    ADD_FAILURE() << "started";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot start kiln-no-such-program: No such file or directory");
  }
  EXPECT_FALSE(launcher.launched("run"));
}

TEST(Launcher, ReapsEachEndInLaunchOrderWithItsExitCode) {
  const std::string dir = fresh_dir("reap");
  Launcher launcher;
  launcher.start("first", detached({"sh", "-c", "exit 3"}, dir + "/first.log"));
  launcher.start("second", detached({"sh", "-c", "kill -9 $$"}, dir + "/second.log"));
  launcher.start("third", detached({"sh", "-c", "sleep 30"}, dir + "/third.log"));
  std::vector<std::string> ended;
  for (int i = 0; i < 500 && ended.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const std::string& name : launcher.reap()) ended.push_back(name);
  }
  EXPECT_EQ(ended, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(launcher.exit_code("first"), 3);
  EXPECT_EQ(launcher.exit_code("second"), 128 + 9);
  EXPECT_TRUE(launcher.running("third"));
  EXPECT_EQ(launcher.running_count(), 1u);
  EXPECT_TRUE(launcher.reap().empty()) << "an end is told once";

  EXPECT_TRUE(launcher.kill("third"));
  EXPECT_EQ(wait_for_exit(launcher, "third"), 128 + 15);
  EXPECT_FALSE(launcher.kill("third")) << "it has ended";
  EXPECT_FALSE(launcher.kill("nobody"));
  EXPECT_FALSE(launcher.launched("nobody"));
  EXPECT_EQ(launcher.exit_code("nobody"), std::nullopt);
}

TEST(Launcher, StopAllSendsEachRunningProcessOneSigterm) {
  const std::string dir = fresh_dir("stop_all");
  Launcher launcher;
  // Each counts the SIGTERMs it receives, and ends when told twice or after a while.
  for (const std::string name : {"a", "b"}) {
    ChildCommand command;
    command.argv = {"sh", "-c", "n=0; trap 'n=$((n+1)); echo term $n' TERM; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; done; exit 0"};
    command.log_path = dir + "/" + name + ".log";
    launcher.start(name, command);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  launcher.stop_all();
  EXPECT_EQ(wait_for_exit(launcher, "a"), 0);
  EXPECT_EQ(wait_for_exit(launcher, "b"), 0);
  EXPECT_EQ(text_of(dir + "/a.log"), "term 1\n");
  EXPECT_EQ(text_of(dir + "/b.log"), "term 1\n");
}

}  // namespace
}  // namespace kiln::launch
