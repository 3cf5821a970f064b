// A fresh folder with the small corpus and a run store, for the tests that drive kiln sweep
// through the real binary (tests/sweep_cli_test.cpp, tests/ranks_sweep_cli_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {

class SweepFixture : public ::testing::Test {
 protected:
  // `folder`: the test folder's name under the tests' scratch root (fresh_dir).
  explicit SweepFixture(std::string folder) : folder_(std::move(folder)) {}

  void SetUp() override {
    dir_ = fresh_dir(folder_);
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }
  // The small run's settings for every point, its checkpoints under this test's folder.
  std::string base() const {
    return small_run(prefix_) + " --set train.checkpoint_dir=" + dir_ + "/checkpoints --store " + store_;
  }
  // What `command` printed, parsed as JSON (a discarded value when it is not); the command
  // must succeed.
  nlohmann::json json_of(const std::string& command) const {
    const CommandResult r = run_command(command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  }

  std::string dir_, prefix_, store_;

 private:
  std::string folder_;
};

}  // namespace kiln::test
