#include "trainer/checkpoint/background_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "base/check.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

// A write that stays in flight until it is let go, and says when it has begun.
struct HeldWrite {
  std::promise<void> go;
  std::shared_future<void> went = go.get_future().share();
  std::shared_ptr<std::promise<void>> begin = std::make_shared<std::promise<void>>();
  std::future<void> begun = begin->get_future();
  std::function<WrittenCheckpoint()> write(const std::string& path, int64_t bytes) {
    return [went = went, begin = begin, path, bytes] {
      begin->set_value();
      went.wait();
      return WrittenCheckpoint{path, bytes};
    };
  }
};

// The outcome of the write in flight, polled without waiting, within 10 s.
std::optional<CheckpointOutcome> poll_finished(BackgroundWriter& writer) {
  for (int i = 0; i < 1000; ++i) {
    if (std::optional<CheckpointOutcome> outcome = writer.finished()) return outcome;
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

TEST(BackgroundWriter, OneWriteIsInFlightUntilItsOutcomeIsTaken) {
  BackgroundWriter writer;
  EXPECT_FALSE(writer.in_flight());
  EXPECT_FALSE(writer.finished());
  EXPECT_FALSE(writer.wait());

  HeldWrite held;
  writer.start(4, held.write("checkpoints/r/step-00000004", 1234));
  EXPECT_TRUE(writer.in_flight());
  // Held 20 ms from when the write began, which its seconds count from or before.
  held.begun.wait();
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(writer.finished());  // still writing
  EXPECT_TRUE(writer.in_flight());
  // A second is refused while the first is written: the caller waits first.
  EXPECT_EQ(test::error_of([&] { writer.start(6, held.write("checkpoints/r/step-00000006", 1)); }),
            "a checkpoint was started while another was being written");

  held.go.set_value();
  const std::optional<CheckpointOutcome> outcome = writer.wait();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->step, 4);
  EXPECT_EQ(outcome->written.path, "checkpoints/r/step-00000004");
  EXPECT_EQ(outcome->written.bytes, 1234);
  EXPECT_EQ(outcome->error, "");
  EXPECT_GE(outcome->seconds, 0.02);
  EXPECT_FALSE(writer.in_flight());
  EXPECT_FALSE(writer.wait());  // taken once

  writer.start(6, [] { return WrittenCheckpoint{"checkpoints/r/step-00000006", 99}; });
  const std::optional<CheckpointOutcome> next = poll_finished(writer);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->step, 6);
  EXPECT_EQ(next->written.path, "checkpoints/r/step-00000006");
  EXPECT_FALSE(writer.in_flight());
  EXPECT_FALSE(writer.finished());
}

TEST(BackgroundWriter, AWriteThatFailsIsAnOutcomeWithItsError) {
  BackgroundWriter writer;
  writer.start(8, []() -> WrittenCheckpoint { fail("checkpoint: cannot create checkpoints/r: No space left on device"); });
  std::optional<CheckpointOutcome> outcome = writer.wait();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->step, 8);
  EXPECT_EQ(outcome->error, "checkpoint: cannot create checkpoints/r: No space left on device");
  EXPECT_EQ(outcome->written.path, "");

  writer.start(10, []() -> WrittenCheckpoint {
    throw std::filesystem::filesystem_error("rename", std::make_error_code(std::errc::no_space_on_device));
  });
  outcome = poll_finished(writer);
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->step, 10);
  EXPECT_NE(outcome->error.find("rename"), std::string::npos) << outcome->error;

  // Anything else is a bug, not a full disk: it reaches the training thread as it was thrown.
  writer.start(12, []() -> WrittenCheckpoint { throw std::logic_error("a bug"); });
  EXPECT_THROW(writer.wait(), std::logic_error);
  EXPECT_FALSE(writer.in_flight());
}

TEST(BackgroundWriter, AWriteBegunIsFinishedBeforeItsWriterGoes) {
  std::atomic<bool> written = false;
  {
    BackgroundWriter writer;
    writer.start(2, [&written] {
      std::this_thread::sleep_for(50ms);
      written = true;
      return WrittenCheckpoint{"checkpoints/r/step-00000002", 1};
    });
  }
  EXPECT_TRUE(written);
}

}  // namespace
}  // namespace kiln
