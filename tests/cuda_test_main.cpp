// main() of cuda_tests: gtest's own, except that where KILN_REQUIRE_GPU=1 (scripts/gpu-check
// sets it) a test that skipped makes the run fail: each is named with the reason it gave, and
// the exit status is 1. Without a GPU the suite builds and skips ("skipped: no GPU"); on the
// check's GPU a skip is a test that did not run (a driver older than the runtime, cuDNN not
// loading, mpirun missing), never a pass.
//
// The skips are read after the run, from each test's result: a failure added from inside a
// listener's OnTestPartResult would deadlock, since gtest reports to listeners under the lock
// that adding a result takes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

bool gpu_required() {
  const char* require = std::getenv("KILN_REQUIRE_GPU");
  return require != nullptr && std::string(require) == "1";
}

// The reason a skipped test gave (GTEST_SKIP's message).
std::string skip_reason(const testing::TestResult& result) {
  for (int i = 0; i < result.total_part_count(); ++i)
    if (result.GetTestPartResult(i).skipped()) return result.GetTestPartResult(i).message();
  return "";
}

// Prints every skipped test as a failure; how many there were.
int report_skips() {
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  int skipped = 0;
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& test = *suite.GetTestInfo(t);
      if (!test.should_run() || !test.result()->Skipped()) continue;
      std::printf("[  FAILED  ] %s.%s: KILN_REQUIRE_GPU=1 and the test skipped: %s\n",
                  suite.name(), test.name(), skip_reason(*test.result()).c_str());
      ++skipped;
    }
  }
  if (skipped > 0)
    std::printf("KILN_REQUIRE_GPU=1: %d skipped test%s, each a failure\n", skipped,
                skipped == 1 ? "" : "s");
  return skipped;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  if (gpu_required() && report_skips() > 0) return 1;
  return status;
}
