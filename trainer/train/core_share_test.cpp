#include "trainer/train/core_share.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/check.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A registry of its own for each test, under a private parent as the real one is.
std::string fresh_registry(const std::string& name) {
  const fs::path parent = fs::temp_directory_path() / ("kiln_core_share_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(parent);
  fs::create_directory(parent);
  fs::permissions(parent, fs::perms::owner_all);
  return (parent / "cpu-runs").string();
}

size_t entries(const std::string& registry) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(registry), fs::directory_iterator()));
}

TEST(CoreShare, RunsInOneRegistryShareTheCoresEvenly) {
  const std::string registry = fresh_registry("even");
  CoreShare first(registry, 4);
  EXPECT_EQ(first.threads(), 4);
  {
    CoreShare second(registry, 4);
    EXPECT_EQ(second.threads(), 2);
    EXPECT_EQ(first.recount(), 2);
    EXPECT_EQ(first.runs(), 2);
    CoreShare third(registry, 4);
    EXPECT_EQ(third.threads(), 1);  // never less than one thread, never more than its share
  }
  EXPECT_EQ(first.recount(), 4);
  EXPECT_EQ(entries(registry), 1u);
}

TEST(CoreShare, TheRanksMpirunStartedHereCountBeforeTheyRegister) {
  const std::string registry = fresh_registry("ranks");
  CoreShare rank(registry, 8, 4);
  EXPECT_EQ(rank.threads(), 2);
  EXPECT_EQ(rank.runs(), 4);
}

TEST(CoreShare, ARunKilledWithNineStopsCountingAtTheNextCount) {
  const std::string registry = fresh_registry("killed");
  CoreShare mine(registry, 2);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CoreShare other(registry, 2);
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  EXPECT_EQ(mine.recount(), 1);
  EXPECT_EQ(mine.runs(), 2);
  ::kill(child, SIGKILL);  // no destructor runs: its entry stays behind
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(entries(registry), 2u);
  EXPECT_EQ(mine.recount(), 2);
  EXPECT_EQ(entries(registry), 1u);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(CoreShare, EntriesOfOtherProcessesOrNoPidAreNotRuns) {
  const std::string registry = fresh_registry("stale");
  CoreShare mine(registry, 2);
  std::ofstream(fs::path(registry) / "1.0").flush();  // pid 1 runs, but never registered here
  // This process's id with another start time: a run that ended and whose id was given again
  // (to another user's process, or to another program of ours).
  std::ofstream(fs::path(registry) / (std::to_string(::getpid()) + ".9")) << "1";
  std::ofstream(fs::path(registry) / "junk").flush();
  EXPECT_EQ(mine.recount(), 2);
  EXPECT_EQ(entries(registry), 1u);
}

using Clock = ShareNotice::Clock;
using std::chrono::seconds;

TEST(ShareNotice, TheShareARunStartsWithIsSaidAtOnceAndTheUsualOneNot) {
  const Clock::time_point t0{};
  ShareNotice shared(2);
  EXPECT_TRUE(shared.due(1, t0));
  EXPECT_FALSE(shared.due(1, t0 + seconds(1)));
  ShareNotice alone(2);
  EXPECT_FALSE(alone.due(2, t0));
  EXPECT_FALSE(alone.due(2, t0 + seconds(100)));
}

TEST(ShareNotice, RunsThatComeAndGoForSecondsAreNeverSaid) {
  const Clock::time_point t0{};
  ShareNotice notice(2);
  EXPECT_FALSE(notice.due(2, t0));
  // Test runs beside it: each a few seconds, the count back between them.
  for (int s = 1; s < 600; ++s) EXPECT_FALSE(notice.due(s % 8 < 5 ? 1 : 2, t0 + seconds(s))) << s;
}

TEST(ShareNotice, AChangeThatLastsIsSaidAtMostOnceAMinute) {
  const Clock::time_point t0{};
  ShareNotice notice(2);
  EXPECT_FALSE(notice.due(2, t0));
  EXPECT_FALSE(notice.due(1, t0 + seconds(1)));
  EXPECT_FALSE(notice.due(1, t0 + seconds(10)));
  EXPECT_TRUE(notice.due(1, t0 + seconds(11)));  // the same for ShareNotice::kLasting
  EXPECT_FALSE(notice.due(1, t0 + seconds(12)));
  // Back to the usual at once, lasting from 13 s: said no sooner than a minute after the last.
  EXPECT_FALSE(notice.due(2, t0 + seconds(13)));
  EXPECT_FALSE(notice.due(2, t0 + seconds(30)));
  EXPECT_FALSE(notice.due(2, t0 + seconds(70)));
  EXPECT_TRUE(notice.due(2, t0 + seconds(71)));
  // A change back to what was last said is no news.
  EXPECT_FALSE(notice.due(1, t0 + seconds(140)));
  EXPECT_FALSE(notice.due(2, t0 + seconds(141)));
  EXPECT_FALSE(notice.due(2, t0 + seconds(300)));
}

TEST(CoreShare, AFolderOthersCanWriteOrALinkIsRefused) {
  const std::string registry = fresh_registry("open");
  fs::create_directory(registry);
  fs::permissions(registry, fs::perms::all);
  try {
    CoreShare share(registry, 2);
    FAIL() << "an open folder was used";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "core share: folder " + registry +
                                         " may be written by other users (mode 0777); `chmod go-w` it if you trust it");
  }
  fs::remove(registry);
  fs::create_directory_symlink(fs::temp_directory_path(), registry);
  EXPECT_THROW(CoreShare(registry, 2), Error);
}

TEST(CoreShare, UsableCoresFollowTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &saved)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(usable_cores(), 1);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(usable_cores(), CPU_COUNT(&saved));
}

}  // namespace
}  // namespace kiln
