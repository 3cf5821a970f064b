#include "base/mpi_launch.h"

#include <gtest/gtest.h>
#include <sched.h>

#include "base/check.h"

namespace kiln {
namespace {

using Words = std::vector<std::string>;

TEST(MpirunWords, AsAUserWithinTheCoresItAddsNothing) {
  const MpirunWords w = mpirun_words(2, 4, false);
  EXPECT_EQ(w.argv, (Words{"mpirun", "-np", "2"}));
  EXPECT_EQ(w.note, "");
}

TEST(MpirunWords, AsRootItAllowsRoot) {
  EXPECT_EQ(mpirun_words(4, 4, true).argv, (Words{"mpirun", "-np", "4", "--allow-run-as-root"}));
}

TEST(MpirunWords, MoreRanksThanCoresOversubscribesAndSaysSo) {
  const MpirunWords w = mpirun_words(4, 2, true);
  EXPECT_EQ(w.argv, (Words{"mpirun", "-np", "4", "--allow-run-as-root", "--oversubscribe"}));
  EXPECT_EQ(w.note, "4 ranks on 2 cores: oversubscribing (slower than 1 rank per core)");
  EXPECT_EQ(mpirun_words(3, 1, false).note, "3 ranks on 1 core: oversubscribing (slower than 1 rank per core)");
}

TEST(MpirunWords, OneRankIsNotALaunch) { EXPECT_THROW(mpirun_words(1, 2, false), Error); }

TEST(MpirunSlots, AtLeastOneAndNoMoreThanTheCpusThisProcessMayUse) {
  cpu_set_t allowed;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  EXPECT_GE(mpirun_slots(), 1);
  EXPECT_LE(mpirun_slots(), CPU_COUNT(&allowed));
}

}  // namespace
}  // namespace kiln
