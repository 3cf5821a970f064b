#include "base/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/check.h"
#include "tests/test_files.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::fresh_dir;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int exit_code_of(pid_t pid) {
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ChildCommand shell(const std::string& script, const std::string& log_path) {
  ChildCommand command;
  command.argv = {"/bin/sh", "-c", script};
  command.log_path = log_path;
  return command;
}

TEST(ChildProcess, TheChildHasOnlyStdinStdoutAndStderr) {
  const std::string dir = fresh_dir("descriptors");
  // Descriptors a child must not get, though opened without close-on-exec.
  const int inherited = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(inherited, 0);
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  // Not the shell's last command, so the shell lists its own descriptors rather than exec'ing ls.
  const pid_t pid = start_child(shell("ls /proc/$$/fd; true", dir + "/out.log"));
  EXPECT_EQ(exit_code_of(pid), 0);
  EXPECT_EQ(read_text(dir + "/out.log"), "0\n1\n2\n");
  ::close(inherited);
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
}

TEST(ChildProcess, TheLogIsPrivateAndAppendedTo) {
  const std::string dir = fresh_dir("log");
  const std::string log = dir + "/run.log";
  EXPECT_EQ(exit_code_of(start_child(shell("echo one; echo two >&2", log))), 0);
  EXPECT_EQ(exit_code_of(start_child(shell("echo three", log))), 0);
  EXPECT_EQ(read_text(log), "one\ntwo\nthree\n");
  struct stat st;
  ASSERT_EQ(::stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ChildProcess, ALogThatIsASymbolicLinkIsRefusedAndItsTargetUntouched) {
  const std::string dir = fresh_dir("planted");
  std::ofstream(dir + "/target") << "precious\n";
  fs::create_symlink(dir + "/target", dir + "/run.log");
  const std::string marker = dir + "/started";
  try {
    start_child(shell("touch " + marker, dir + "/run.log"));
    ADD_FAILURE() << "a planted link was followed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "log " + dir + "/run.log is a symbolic link; kiln does not follow it");
  }
  EXPECT_EQ(read_text(dir + "/target"), "precious\n");
  EXPECT_FALSE(fs::exists(marker)) << "nothing starts when its log is refused";
}

TEST(ChildProcess, ADetachedChildLeadsASessionAndAnotherOnlyAGroup) {
  const std::string dir = fresh_dir("session");
  ChildCommand command = shell("sleep 0.2", dir + "/out.log");
  const pid_t grouped = start_child(command);
  EXPECT_EQ(::getpgid(grouped), grouped);
  EXPECT_EQ(::getsid(grouped), ::getsid(0));
  EXPECT_EQ(exit_code_of(grouped), 0);
  command.detached = true;
  const pid_t detached = start_child(command);
  EXPECT_EQ(::getsid(detached), detached);
  EXPECT_EQ(exit_code_of(detached), 0);
}

// The mask of a "SigBlk:\tHEX" or "SigIgn:\tHEX" line of /proc/PID/status, as printed.
uint64_t signal_mask(const std::string& status, const std::string& field) {
  const size_t at = status.find(field + ":\t");
  return at == std::string::npos ? ~uint64_t{0} : std::stoull(status.substr(at + field.size() + 2, 16), nullptr, 16);
}

TEST(ChildProcess, SignalsStartAtTheirDefaultsWhateverKilnSetForItself) {
  const std::string dir = fresh_dir("signals");
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &previous), 0);
  sigset_t blocked, before;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &blocked, &before), 0);
  // exec: cat reads its own status, the process start_child made. Read from a child of the
  // shell, the shell's mask could be its own all-blocked one of the moment it forks (dash
  // blocks every signal around its vfork), which failed this test now and then.
  const pid_t pid = start_child(shell("exec cat /proc/self/status", dir + "/out.log"));
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ::sigaction(SIGPIPE, &previous, nullptr);
  EXPECT_EQ(exit_code_of(pid), 0);
  const std::string status = read_text(dir + "/out.log");
  EXPECT_EQ(signal_mask(status, "SigBlk"), 0u) << status;
  // Of the standard signals none is ignored (glibc ignores two real-time signals of its own).
  EXPECT_EQ(signal_mask(status, "SigIgn") & ((uint64_t{1} << 31) - 1), 0u) << status;
}

TEST(ChildProcess, StdinAndTheEnvironmentAreTheOnesGiven) {
  const std::string dir = fresh_dir("input");
  std::ofstream(dir + "/input") << "from the file\n";
  const int input = ::open((dir + "/input").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(input, 0);
  ChildCommand command = shell("cat; echo \"A=$A HOME=$HOME\"", dir + "/out.log");
  command.stdin_fd = input;
  command.environment = std::vector<std::string>{"A=1"};
  EXPECT_EQ(exit_code_of(start_child(command)), 0);
  ::close(input);
  EXPECT_EQ(read_text(dir + "/out.log"), "from the file\nA=1 HOME=\n");
  // Without a descriptor, stdin is /dev/null: the child reads an end at once.
  EXPECT_EQ(exit_code_of(start_child(shell("cat; echo done", dir + "/null.log"))), 0);
  EXPECT_EQ(read_text(dir + "/null.log"), "done\n");
}

TEST(ChildProcess, AProgramThatCannotStartIsAnError) {
  ChildCommand command;
  command.argv = {"/nonexistent/kiln-child"};
  try {
    start_child(command);
    ADD_FAILURE() << "started";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot start /nonexistent/kiln-child: No such file or directory");
  }
  command.argv = {"kiln-no-such-program-on-path"};
  EXPECT_THROW(start_child(command), Error);
}

TEST(ChildProcess, ReplacingItselfAProcessKeepsOnlyItsStandardStreams) {
  const int open_fd = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(open_fd, 3);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close_all_but_standard_streams();
    const bool closed = ::fcntl(open_fd, F_GETFD) == -1 && ::fcntl(STDERR_FILENO, F_GETFD) != -1;
    ::_exit(closed ? 0 : 1);
  }
  EXPECT_EQ(exit_code_of(pid), 0);
  ::close(open_fd);
}

}  // namespace
}  // namespace kiln
