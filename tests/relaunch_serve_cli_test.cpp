// End-to-end, through the real binary: kiln runs resume and fork serve the run's dashboard where
// it served, on another port when something holds that one (kiln serve, as the demo suggests),
// where --serve says, or not at all with --no-serve; a busy port never fails the training
// (docs/runs.md#resuming-and-forking).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace net = boost::asio;

// A port nothing listens on at the moment of asking.
uint16_t free_port() {
  net::io_context io;
  net::ip::tcp::acceptor probe(io, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return probe.local_endpoint().port();
}

TEST(RelaunchServeCli, ABusyDashboardPortNeverStopsAForkOrAResume) {
  const std::string dir = fresh_dir("relaunch_serve");
  const std::string prefix = prepare_corpus(dir);
  const std::string store = " --store " + dir + "/runs.db";
  const std::string port = std::to_string(free_port());
  const CommandResult base =
      run_command(kiln + " train --name base --serve 127.0.0.1:" + port + store + small_run(prefix));
  ASSERT_EQ(base.exit_code, 0) << base.output;
  ASSERT_NE(base.output.find("dashboard: http://127.0.0.1:" + port + "/"), std::string::npos) << base.output;

  // The port the run served on is held now, as kiln serve holds it beside a demo.
  net::io_context io;
  net::ip::tcp::acceptor holder(io, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                                           static_cast<uint16_t>(std::stoi(port))));
  holder.listen();

  const CommandResult fork = run_command(kiln + " runs fork base --step 6 --name moved --set train.steps=8" + store);
  ASSERT_EQ(fork.exit_code, 0) << fork.output;
  EXPECT_NE(fork.output.find("kiln: 127.0.0.1:" + port + " is in use (a kiln serve there shows this run when it "
                             "reads the same store), so run 1 ('base') serves its dashboard on 127.0.0.1:"),
            std::string::npos)
      << fork.output;
  EXPECT_NE(fork.output.find("dashboard: http://127.0.0.1:"), std::string::npos) << fork.output;
  EXPECT_EQ(fork.output.find("dashboard: http://127.0.0.1:" + port + "/"), std::string::npos) << fork.output;
  EXPECT_NE(fork.output.find("step 8/8"), std::string::npos) << fork.output;

  // Told where, it serves there; told not to, it serves nowhere and says so.
  const std::string chosen = std::to_string(free_port());
  const CommandResult there = run_command(kiln + " runs fork base --step 6 --name there --set train.steps=8 --serve 127.0.0.1:" +
                                          chosen + store);
  ASSERT_EQ(there.exit_code, 0) << there.output;
  EXPECT_NE(there.output.find("dashboard: http://127.0.0.1:" + chosen + "/"), std::string::npos) << there.output;
  const CommandResult none = run_command(kiln + " runs resume base --no-serve --set train.steps=8" + store);
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("kiln: run 1 ('base') trains without a dashboard of its own (--no-serve); kiln serve "
                             "shows it\n"),
            std::string::npos)
      << none.output;
  EXPECT_EQ(none.output.find("dashboard:"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("step 8/8"), std::string::npos) << none.output;

  // What cannot be meant is refused before anything starts.
  const CommandResult both = run_command(kiln + " runs fork base --step 6 --serve 127.0.0.1:1 --no-serve" + store);
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("excludes"), std::string::npos) << both.output;
  const CommandResult token = run_command(kiln + " runs fork base --step 6 --no-serve --token abcdefghijklmnop" + store);
  EXPECT_EQ(token.exit_code, 1);
  EXPECT_EQ(token.output, "kiln: error: --token and --token-file guard a dashboard, and --no-serve serves none\n");
  const CommandResult bad = run_command(kiln + " runs fork base --step 6 --serve nowhere" + store);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.output.rfind("kiln: error: --serve nowhere: ", 0), 0u) << bad.output;
}

}  // namespace
}  // namespace kiln::test
