// End-to-end: `kiln serve` as a user starts it: a store that is not there, an address beyond
// this machine without a token and a bad address are refused in one line; a good one serves
// until Ctrl-C and then exits cleanly.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "store/run_writer.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

const std::string kiln = KILN_BINARY;

TEST(ServeCli, RefusesAMissingStoreAndAnExposedAddressWithoutAToken) {
  const std::string dir = fresh_dir("serve_cli_refuse");
  const CommandResult missing = run_command(kiln + " serve --store " + dir + "/none.db");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.output, "kiln: error: store: no store at " + dir +
                                "/none.db (give --store PATH or set KILN_STORE; `kiln train` creates the store)\n");
  { store::RunWriter writer(dir + "/runs.db"); }
  const CommandResult exposed = run_command("env -u KILN_TOKEN " + kiln + " serve --store " + dir +
                                            "/runs.db --listen 0.0.0.0:0");
  EXPECT_EQ(exposed.exit_code, 1);
  EXPECT_EQ(exposed.output,
            "kiln: error: --listen 0.0.0.0 reaches beyond this machine; give --token TOKEN so that only "
            "holders of it can change runs, or listen on 127.0.0.1\n");
  const CommandResult bad = run_command(kiln + " serve --store " + dir + "/runs.db --listen 127.0.0.1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.output,
            "kiln: error: --listen '127.0.0.1': no port (expected HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080)\n");
}

TEST(ServeCli, ServesUntilInterrupted) {
  const std::string dir = fresh_dir("serve_cli_serve");
  { store::RunWriter writer(dir + "/runs.db"); }
  const std::string log = dir + "/serve.log";
  const int pid = start_background(kiln + " serve --store " + dir + "/runs.db --listen 127.0.0.1:0", log);
  for (int i = 0; i < 300 && read_text(log).find("(Ctrl-C stops)") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(read_text(log).find("kiln: serving " + dir + "/runs.db at http://127.0.0.1:"), std::string::npos)
      << read_text(log);
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
}

}  // namespace
}  // namespace kiln::test
