#include "store/run_launch.h"

#include <gtest/gtest.h>

#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;

TEST(RunLaunch, ReadsBackWhatItWrites) {
  EXPECT_EQ(launch_to_json(RunLaunch{}), "{}");
  EXPECT_EQ(parse_launch("{}"), RunLaunch{});
  RunLaunch served{"[::1]:0", {"a.example", "10.0.0.2"}, 4, 2, true};
  EXPECT_EQ(parse_launch(launch_to_json(served)), served);
  served.allowed_hosts.clear();
  served.token = false;
  EXPECT_EQ(parse_launch(launch_to_json(served)), served);
}

// Anyone who can write the store can write this text: only the shape kiln writes is read.
TEST(RunLaunch, RefusesAnyOtherShapeInOneLine) {
  const auto refused = [](const std::string& json) { return error_of([&] { parse_launch(json); }); };
  EXPECT_EQ(refused("[]"), "store: the launch record is not a JSON object");
  EXPECT_EQ(refused("{"), "store: the launch record is not a JSON object");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:1","config":"/evil.json"})"),
            "store: the launch record holds 'config', which kiln does not record");
  EXPECT_EQ(refused(R"({"serve":8080})"), "store: the launch record holds a serve address that is not text");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:1","allow_hosts":"a.example"})"),
            "store: the launch record holds allow_hosts that is not a list");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:1","allow_hosts":[1]})"),
            "store: the launch record holds a host name that is not text");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:1","max_connections":0})"),
            "store: the launch record holds a max_connections that is not a whole number of 1 or more");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:1","max_subscribers":2.5})"),
            "store: the launch record holds a max_subscribers that is not a whole number of 1 or more");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:1","max_connections":18446744073709551615})"),
            "store: the launch record holds a max_connections that is not a whole number of 1 or more");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:1","token":"yes"})"),
            "store: the launch record holds a token flag that is not true or false");
  EXPECT_EQ(refused(R"({"token":true})"), "store: the launch record holds dashboard options without a serve address");
}

}  // namespace
}  // namespace kiln::store
