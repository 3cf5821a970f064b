#include "trainer/parallel/wait_limits.h"

#include <gtest/gtest.h>

#include "tests/error_of.h"

namespace kiln {
namespace {

// Every communicator's waits hear of a peer's failure through the one check the MPI session
// sets, the NCCL communicator's waits on the GPU as much as MPI's own.
TEST(WaitClock, HearsOfAPeersFailureWhateverItWaitsOn) {
  WaitClock clock("all_reduce over ranks 0-1");
  clock.check();  // no check set: nothing to hear
  set_peer_failure_check([] { throw PeerFailed("rank 1 failed: out of GPU memory"); });
  EXPECT_EQ(test::error_of([&] { clock.check(); }), "rank 1 failed: out of GPU memory");
  {
    UnlimitedWaits paused;  // a paused run still hears of a failure
    EXPECT_THROW(clock.check(), PeerFailed);
  }
  set_peer_failure_check(nullptr);
  clock.check();
}

}  // namespace
}  // namespace kiln
