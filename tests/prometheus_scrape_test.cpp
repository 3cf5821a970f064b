// A real Prometheus (Debian's, installed by scripts/setup.sh) scrapes a live kiln run's
// /metrics every second, and its own HTTP API answers PromQL with the run's tokens per second
// and loss, labelled by run and rank, and the alert the run fired, labelled by rule: what a
// Grafana board or an alert rule over a cluster's Prometheus reads (docs/dashboard.md).
#include <gtest/gtest.h>
#include <signal.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "monitor/server/test_client.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

using nlohmann::json;

// A port nothing listens on now (the kernel's pick for a socket bound to port 0).
uint16_t free_port() {
  monitor::test::net::io_context io;
  monitor::test::tcp::acceptor acceptor(io, {monitor::test::net::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

// PromQL's instant vector for `query` on Prometheus at `port`, once it holds a sample (every
// 200 ms for up to 60 s); empty if it never does.
json samples(uint16_t port, const std::string& query) {
  std::string target = "/api/v1/query?query=";
  for (unsigned char c : query) {
    char escaped[4];
    std::snprintf(escaped, sizeof escaped, "%%%02X", c);
    target += std::isalnum(c) ? std::string(1, static_cast<char>(c)) : std::string(escaped);
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    try {
      const monitor::test::HttpResult r = monitor::test::request(port, monitor::test::http::verb::get, target);
      if (r.status == 200) {
        const json result = r.json()["data"]["result"];
        if (!result.empty()) return result;
      }
    } catch (const std::exception&) {
      // Prometheus is still starting.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return json::array();
}

TEST(PrometheusScrape, ALiveRunsMetricsArriveWithTheirLabels) {
  const std::string dir = fresh_dir("prometheus_scrape");
  const std::string prefix = prepare_corpus(dir);
  // A memory limit no process stays under fires the memory alert at the first logged step.
  const int run = start_background(kiln_binary() + " train --store " + dir + "/runs.db --name scraped --serve 127.0.0.1:0" +
                                       small_run(prefix) +
                                       " --set train.steps=1000000 --set train.log_interval=5 --set train.eval_interval=0"
                                       " --set alerts.memory_fraction=0.000001",
                                   dir + "/train.log");
  const std::string url = wait_for_url(dir + "/train.log");
  ASSERT_FALSE(url.empty()) << read_text(dir + "/train.log");
  const uint16_t port = free_port();
  std::ofstream(dir + "/prometheus.yml") << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                                            "scrape_configs:\n"
                                            "  - job_name: kiln\n"
                                            "    static_configs: [{targets: [\"127.0.0.1:"
                                         << port_of(url) << "\"]}]\n";
  const int prometheus = start_background("prometheus --config.file=" + dir + "/prometheus.yml --storage.tsdb.path=" +
                                              dir + "/tsdb --web.listen-address=127.0.0.1:" + std::to_string(port) +
                                              " --log.level=warn",
                                          dir + "/prometheus.log");

  const json up = samples(port, "up{job=\"kiln\"}");
  ASSERT_EQ(up.size(), 1u) << read_text(dir + "/prometheus.log");
  EXPECT_EQ(up[0]["value"][1], "1") << "the scrape itself failed: " << up.dump();

  const json speed = samples(port, "kiln_tokens_per_second{job=\"kiln\"}");
  ASSERT_EQ(speed.size(), 1u) << speed.dump();
  EXPECT_EQ(speed[0]["metric"]["run"], "scraped");
  EXPECT_EQ(speed[0]["metric"]["rank"], "0");
  EXPECT_GT(std::stod(speed[0]["value"][1].get<std::string>()), 0.0);

  const json loss = samples(port, "kiln_loss{run=\"scraped\",rank=\"0\"}");
  ASSERT_EQ(loss.size(), 1u) << loss.dump();
  const double value = std::stod(loss[0]["value"][1].get<std::string>());
  EXPECT_TRUE(std::isfinite(value) && value > 0 && value < 10) << value;

  const json alerts = samples(port, "kiln_alerts_total{run=\"scraped\",rule=\"memory\"} >= 1");
  ASSERT_EQ(alerts.size(), 1u) << alerts.dump() << read_text(dir + "/train.log");
  EXPECT_EQ(alerts[0]["metric"]["job"], "kiln");

  kill(prometheus, SIGTERM);
  kill(run, SIGINT);
  EXPECT_EQ(wait_exit(prometheus), 0) << read_text(dir + "/prometheus.log");
  EXPECT_EQ(wait_exit(run), 130) << read_text(dir + "/train.log");  // interrupted: stopped cleanly
}

}  // namespace
}  // namespace kiln::test
