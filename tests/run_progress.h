// Following a live run through its store, for the end-to-end tests that act on a run
// while it trains.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "base/check.h"
#include "store/run_queries.h"
#include "store/schema.h"

namespace kiln::test {

// The run's last logged step; nullopt while the run is not in the store yet.
inline std::optional<int64_t> last_step(const std::string& store_path, const std::string& run) {
  try {
    auto db = store::open_store(store_path, store::Access::ReadOnly);
    return store::get_run(*db, store::resolve_run(*db, run)).last_step;
  } catch (const Error&) {
    return std::nullopt;  // not created yet
  }
}

// Polls until the run has logged a step after `after`; the step, or nullopt after 30 s.
inline std::optional<int64_t> wait_for_step_after(const std::string& store_path,
                                                  const std::string& run, int64_t after) {
  for (int i = 0; i < 300; ++i) {
    if (const auto step = last_step(store_path, run); step && *step > after) return step;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

}  // namespace kiln::test
