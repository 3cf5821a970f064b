// Helpers shared by the store's tests: a fresh folder per test, and rows with known values.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "store/types.h"
#include "tests/error_of.h"

namespace kiln::store::testing_util {

namespace fs = std::filesystem;

// A fresh directory per test (test binaries may run in parallel processes).
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / ("kiln_store_" + std::string(info->test_suite_name()) +
                                            "_" + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name = "runs.db") const { return (dir_ / name).string(); }

  fs::path dir_;
};

using test::error_of;

// Runs `check` in a child process without root's power to write any file (as nobody when
// the tests run as root), and returns what it reports.
inline std::string as_unprivileged(const std::function<std::string()>& check) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
      out = "could not drop privileges";
    } else {
      try {
        out = check();
      } catch (const std::exception& e) {
        out = std::string("unexpected: ") + e.what();
      }
    }
    const ssize_t written = write(fds[1], out.data(), out.size());
    _exit(written == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

// A value that identifies (step, rank): any mix-up of rows shows as a wrong value.
inline double loss_of(int64_t step, int rank) {
  return 10.0 / (1.0 + static_cast<double>(step)) + 0.001 * rank;
}

inline std::vector<MetricRow> interval(int64_t step, int ranks) {
  std::vector<MetricRow> rows;
  for (int r = 0; r < ranks; ++r) {
    MetricRow m;
    m.step = step;
    m.rank = r;
    m.time = 1.7e9 + static_cast<double>(step);
    m.tokens = step * 4096;
    m.loss = loss_of(step, r);
    m.lr = 1e-4;
    m.grad_norm = 0.5 + r;
    m.tokens_per_s = 1000.0 * (r + 1);
    m.mfu = 0.25;
    m.fwd_ms = 1.5;
    m.mem_used = int64_t{1} << 30;
    m.skipped_steps = 0;
    rows.push_back(m);
  }
  return rows;
}

inline RunInfo run_info(const std::string& name) {
  RunInfo info;
  info.name = name;
  info.config_json = R"({"train":{"lr":0.0003,"steps":100},"model":{"n_layer":2}})";
  info.layout = "tp1.pp1.dp1";
  info.backend = "cpu";
  info.device = "test cpu";
  info.host = "testhost";
  info.command_line = "kiln train --name " + name;
  return info;
}

}  // namespace kiln::store::testing_util
