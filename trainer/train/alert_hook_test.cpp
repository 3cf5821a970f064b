#include "tests/test_files.h"
#include "trainer/train/alert_hook.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::fresh_dir;

using test::text_of;

// What a hook printed to its warnings file, once the hook object has waited for them all.
struct Warnings {
  Warnings() : file(std::tmpfile()) {}
  ~Warnings() { std::fclose(file); }
  std::string text() {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    for (int c; (c = std::fgetc(file)) != EOF;) out += static_cast<char>(c);
    return out;
  }
  std::FILE* file;
};

TEST(AlertHook, TheCommandReadsTheAlertOnStdinWithoutTheToken) {
  const std::string dir = fresh_dir("stdin");
  setenv("KILN_TOKEN", "secret", 1);
  Warnings warnings;
  {
    AlertHook hook("cat > " + dir + "/alert.json; echo \"token=$KILN_TOKEN\" > " + dir + "/env", 10, warnings.file);
    EXPECT_TRUE(hook.run(R"({"rule":"loss_spike"})", "loss_spike"));
  }
  unsetenv("KILN_TOKEN");
  EXPECT_EQ(text_of(dir + "/alert.json"), R"({"rule":"loss_spike"})");
  EXPECT_EQ(text_of(dir + "/env"), "token=\n");
  EXPECT_EQ(warnings.text(), "");
}

TEST(AlertHook, TheCommandGetsNoDescriptorOfKilnsButItsStandardStreams) {
  const std::string dir = fresh_dir("descriptors");
  // As the dashboard's listening socket was: open in kiln, and not close-on-exec.
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  Warnings warnings;
  {
    AlertHook hook("exec > " + dir + "/fds; ls /proc/$$/fd; true", 10, warnings.file);
    EXPECT_TRUE(hook.run("{}", "nan"));
  }
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
  EXPECT_EQ(text_of(dir + "/fds"), "0\n1\n2\n");
  EXPECT_EQ(warnings.text(), "");
}

TEST(AlertHook, AFailureIsOneLine) {
  Warnings warnings;
  {
    AlertHook hook("exit 3", 10, warnings.file);
    EXPECT_TRUE(hook.run("{}", "stall"));
  }
  EXPECT_EQ(warnings.text(), "kiln: warning: alerts.command for stall exited with status 3\n");
}

TEST(AlertHook, AHookThatDoesNotReadItsInputStillFinishes) {
  Warnings warnings;
  {
    AlertHook hook("true", 10, warnings.file);
    EXPECT_TRUE(hook.run(std::string(1 << 20, 'x'), "memory"));
  }
  EXPECT_EQ(warnings.text(), "");
}

TEST(AlertHook, ASlowHookIsKilledWithItsChildrenAfterTheTimeout) {
  const std::string dir = fresh_dir("timeout");
  Warnings warnings;
  {
    AlertHook hook("sleep 30; touch " + dir + "/late", 0.3, warnings.file);
    EXPECT_TRUE(hook.run("{}", "straggler"));
  }
  EXPECT_EQ(warnings.text(), "kiln: warning: alerts.command for straggler killed after 0.3 s (alerts.command_timeout_s)\n");
  EXPECT_FALSE(fs::exists(dir + "/late"));
}

TEST(AlertHook, AtMostAFewRunAtOnce) {
  Warnings warnings;
  {
    AlertHook hook("sleep 30", 0.5, warnings.file);
    for (int i = 0; i < AlertHook::kMaxInFlight; ++i) EXPECT_TRUE(hook.run("{}", "throughput"));
    EXPECT_FALSE(hook.run("{}", "throughput"));
  }
  const std::string text = warnings.text();
  EXPECT_EQ(text.find("kiln: warning: alerts.command not run for throughput: 4 hooks still running\n"), 0u) << text;
}

}  // namespace
}  // namespace kiln
