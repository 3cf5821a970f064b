// main() of mpi_tests: every rank runs every test under one MPI session, and the process
// exits non-zero when any test failed on this rank (mpirun then fails as a whole). Rank 0
// prints gtest's report; the other ranks print only their failures, marked with the rank,
// so the log reads as one run.
#include <gtest/gtest.h>

#include <cstdio>

#include "trainer/parallel/mpi_communicator.h"

namespace {

class FailuresOnly : public testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (result.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_, result.file_name(),
                   result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  kiln::MpiSession session;
  const int rank = kiln::MpiSession::world()->rank();
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(rank));
  }
  return RUN_ALL_TESTS();
}
