#include "trainer/checkpoint/background_writer.h"

#include <chrono>
#include <filesystem>
#include <utility>

#include "base/check.h"
#include "trainer/util/step_clock.h"

namespace kiln {

CheckpointOutcome write_outcome(int64_t step, const std::function<WrittenCheckpoint()>& write) {
  const Clock::time_point start = Clock::now();
  CheckpointOutcome outcome;
  outcome.step = step;
  try {
    outcome.written = write();
  } catch (const Error& e) {
    outcome.error = e.what();
  } catch (const std::filesystem::filesystem_error& e) {
    outcome.error = e.what();
  }
  outcome.seconds = seconds_since(start);
  return outcome;
}

BackgroundWriter::~BackgroundWriter() {
  if (write_.valid()) write_.wait();
}

void BackgroundWriter::start(int64_t step, std::function<WrittenCheckpoint()> write) {
  KILN_CHECK(!in_flight(), "a checkpoint was started while another was being written");
  write_ = std::async(std::launch::async,
                      [step, write = std::move(write)] { return write_outcome(step, write); });
}

std::optional<CheckpointOutcome> BackgroundWriter::finished() {
  if (!in_flight() || write_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
  return write_.get();
}

std::optional<CheckpointOutcome> BackgroundWriter::wait() {
  if (!in_flight()) return std::nullopt;
  return write_.get();
}

}  // namespace kiln
