// End-to-end: `kiln serve` as a user starts it: a store that is not there, an address beyond
// this machine without a token, a bad address and a bad --allow-host are refused in one
// line; a good one serves until Ctrl-C and then exits cleanly, answering the host names it
// is given and no more connections than it is told.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <utility>
#include <thread>

#include "monitor/server/test_client.h"
#include "store/run_writer.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

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
            "holders of it can read and change runs, or listen on 127.0.0.1\n");
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

TEST(ServeCli, AnswersTheHostsItIsGivenAndNoMoreConnectionsThanItIsTold) {
  const std::string dir = fresh_dir("serve_cli_hosts");
  { store::RunWriter writer(dir + "/runs.db"); }
  // Two servers: a cap of one connection would make the host checks wait for each other's
  // connection to be let go.
  const auto serve = [&](const std::string& name, const std::string& options) {
    const std::string log = dir + "/" + name + ".log";
    const int pid = start_background(kiln + " serve --store " + dir + "/runs.db --listen 127.0.0.1:0" + options, log);
    const std::string url = wait_for_url(log);
    EXPECT_FALSE(url.empty()) << read_text(log);
    return std::pair{pid, port_of(url)};
  };
  using monitor::test::get;
  const auto [hosts, hosts_port] = serve("hosts", " --allow-host dash.example --allow-host tunnel.example");
  EXPECT_EQ(get(hosts_port, "/api/runs", {{"Host", "dash.example:8080"}}).status, 200u);
  EXPECT_EQ(get(hosts_port, "/api/runs", {{"Host", "tunnel.example"}}).status, 200u);
  EXPECT_EQ(get(hosts_port, "/api/runs", {{"Host", "other.example"}}).status, 403u);
  const auto [capped, capped_port] = serve("capped", " --max-connections 1 --max-subscribers 1");
  monitor::test::net::io_context io;
  monitor::test::tcp::socket idle(io);
  idle.connect(monitor::test::tcp::endpoint(monitor::test::net::ip::make_address("127.0.0.1"), capped_port));
  EXPECT_EQ(get(capped_port, "/api/runs").status, 503u);
  for (const int pid : {hosts, capped}) {
    ::kill(pid, SIGINT);
    EXPECT_EQ(wait_exit(pid), 0);
  }
}

TEST(ServeCli, RefusesAnAllowedHostThatIsNotAName) {
  const std::string dir = fresh_dir("serve_cli_bad_host");
  { store::RunWriter writer(dir + "/runs.db"); }
  // timeout: a server that wrongly accepts the name would otherwise serve on.
  const CommandResult ported =
      run_command("timeout 10 " + kiln + " serve --store " + dir + "/runs.db --listen 127.0.0.1:0 --allow-host http://dash.example:8080");
  EXPECT_EQ(ported.exit_code, 1);
  EXPECT_EQ(ported.output,
            "kiln: error: --allow-host 'http://dash.example:8080': give a host name or an IP address, without a "
            "scheme or a port (e.g. --allow-host dashboard.example.org)\n");
  const CommandResult without_serve = run_command(kiln + " train --allow-host dash.example --max-connections 4");
  EXPECT_EQ(without_serve.exit_code, 1);  // CLI11's usage error
  EXPECT_NE(without_serve.output.find("--allow-host requires --serve"), std::string::npos) << without_serve.output;
}

}  // namespace
}  // namespace kiln::test
