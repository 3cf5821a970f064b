#include "launch/hostfile.h"

#include <gtest/gtest.h>

#include "base/check.h"

namespace kiln::launch {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_hostfile(text, "hosts");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Hostfile, ReadsOpenMpisFormat) {
  const std::vector<Host> hosts =
      parse_hostfile("# the racks\nnode-1 slots=8 max_slots=8\n\n  node-2   # spare\n10.0.0.3 slots=4\n", "hosts");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node-1");
  EXPECT_EQ(hosts[0].slots, 8);
  EXPECT_EQ(hosts[1].name, "node-2");
  EXPECT_FALSE(hosts[1].slots.has_value());
  EXPECT_EQ(hosts[2].name, "10.0.0.3");
  EXPECT_EQ(hosts[2].slots, 4);
}

TEST(Hostfile, RefusesWhatItCannotRead) {
  EXPECT_EQ(error_of("# nothing\n\n"), "--hostfile hosts: names no host (one a line: NAME [slots=N])");
  EXPECT_EQ(error_of("a\nb;rm slots=2\n"),
            "--hostfile hosts, line 2: 'b;rm' is not a host name (letters, digits, '-', '.', '_')");
  EXPECT_EQ(error_of("a slots=0\n"), "--hostfile hosts, line 1: slots=0: expected a whole number of 1 or more");
  EXPECT_EQ(error_of("a cpus=4\n"),
            "--hostfile hosts, line 1: 'cpus=4': expected slots=N or max_slots=N after the host's name");
  EXPECT_EQ(error_of("a\nb\na slots=2\n"),
            "--hostfile hosts, line 3: a is named twice; give each host once, with its slots");
  EXPECT_EQ(error_of("-a\n"), "--hostfile hosts, line 1: '-a' is not a host name (letters, digits, '-', '.', '_')");
}

TEST(Hostfile, SpreadsRanksEvenly) {
  const std::vector<Host> hosts = parse_hostfile("a slots=2\nb\n", "hosts");
  EXPECT_EQ(ranks_per_host(4, hosts), 2);
  EXPECT_EQ(ranks_per_host(2, hosts), 1);
  try {
    ranks_per_host(3, hosts);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "3 ranks do not spread evenly over 2 hosts; give a multiple of 2");
  }
  try {
    ranks_per_host(6, hosts);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "6 ranks over 2 hosts put 3 on each, and a has slots=2");
  }
}

}  // namespace
}  // namespace kiln::launch
