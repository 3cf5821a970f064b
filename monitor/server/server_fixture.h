// A real server on a free loopback port over a real store, for the server's tests: run
// "alpha" has finished (3 logged steps on 2 ranks, a validation row), run "beta" is live
// (its writer stays open so the test can log more rows and steer it).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "store/error.h"
#include "monitor/server/server.h"
#include "store/run_writer.h"
#include "store/test_util.h"

namespace kiln::monitor::test {

inline constexpr const char* kToken = "s3cret";
// The fixture's server has a token, so every API request sends it: as a header, or as a
// header line of a raw upgrade request.
inline const std::pair<std::string, std::string> kAuth{"Authorization", std::string("Bearer ") + kToken};
inline const std::string kAuthLine = std::string("Authorization: Bearer ") + kToken + "\r\n";

class ServerTest : public store::testing_util::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    using store::testing_util::interval;
    using store::testing_util::run_info;
    {
      store::RunWriter alpha_writer(path());
      store::RunInfo info = run_info("alpha");
      info.tags = {"baseline"};
      info.planned_step_s = 0.0125;  // kiln plan's step and rank 0's memory
      info.planned_memory_bytes = int64_t{3} << 20;
      alpha_ = alpha_writer.create_run(info);
      for (int64_t step : {10, 20, 30}) alpha_writer.log_metrics(interval(step, 2));
      alpha_writer.log_valid({30, 0, 2.5});
      alpha_writer.finish(store::RunStatus::Completed);
      alpha_writer.flush();
    }
    live_writer_ = std::make_unique<store::RunWriter>(path());
    store::RunInfo info = run_info("beta");
    info.config_json = R"({"train":{"lr":0.001,"steps":100},"model":{"n_layer":2}})";
    beta_ = live_writer_->create_run(info);
    live_writer_->log_metrics(interval(5, 2));
    live_writer_->flush();

    ServerOptions options;
    options.store_path = path();
    options.token = kToken;
    options.poll_interval = std::chrono::milliseconds(50);
    // The CLI hands in the trainer's check; this one shows what the server passes it.
    options.normalize_setting = [](const std::string& assignment, const std::string& run_config, bool force) {
      if (assignment.rfind("train.lr=", 0) != 0) store::fail("unknown setting '" + assignment + "'");
      if (assignment == "train.lr=1e300" && !force) store::fail("out of range for the run's config " + run_config);
      return assignment;
    };
    configure(options);
    server_ = std::make_unique<Server>(parse_listen_address("127.0.0.1:0"), options);
    server_->start();
    port_ = server_->port();
  }

  // A fixture's own options, over the ones above.
  virtual void configure(ServerOptions&) {}

  void TearDown() override {
    server_.reset();
    live_writer_.reset();
    StoreTest::TearDown();
  }

  int64_t alpha_ = 0;
  int64_t beta_ = 0;
  std::unique_ptr<store::RunWriter> live_writer_;
  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
};

}  // namespace kiln::monitor::test
