#include "trainer/data/ordered_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kiln {
namespace {

TEST(OrderedPool, ResultsComeBackInSubmissionOrder) {
  for (const int workers : {1, 4}) {
    std::vector<int> seen;
    OrderedPool<int> pool(workers, 6, [&](int& r) { seen.push_back(r); });
    for (int i = 0; i < 100; ++i)
      pool.submit([i] {
        // Later jobs finish first: the order must come from the pool, not from timing.
        std::this_thread::sleep_for(std::chrono::microseconds((100 - i) % 7 * 100));
        return i;
      });
    pool.finish();
    ASSERT_EQ(seen.size(), 100u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
  }
}

TEST(OrderedPool, BoundsTheJobsInFlight) {
  std::atomic<int> started{0};
  int consumed = 0;
  OrderedPool<int> pool(4, 3, [&](int&) { ++consumed; });
  for (int i = 0; i < 50; ++i) {
    pool.submit([&] { return ++started; });
    EXPECT_LE(started.load() - consumed, 3 + 1) << "at most max_in_flight ahead of the consumer";
  }
  pool.finish();
  EXPECT_EQ(consumed, 50);
}

TEST(OrderedPool, TheFirstFailureInOrderIsTheOneReported) {
  OrderedPool<int> pool(4, 8, [](int&) {});
  std::string what;
  try {
    for (int i = 0; i < 20; ++i)
      pool.submit([i]() -> int {
        if (i == 5 || i == 6) throw std::runtime_error("job " + std::to_string(i));
        return i;
      });
    pool.finish();
  } catch (const std::runtime_error& e) {
    what = e.what();
    pool.finish();  // after a failure: a no-op, not a later job's error
  }
  EXPECT_EQ(what, "job 5");
}

}  // namespace
}  // namespace kiln
