// The workstation at cluster scale (bench/README.md, "Store and dashboard at scale"): writes
// stores through kiln's own writers, then measures what they cost on disk, how fast the
// writer takes a many-rank run's rows, and how fast `kiln serve` answers the dashboard's API
// calls over them.
//
//   build/kiln_bench_store_scale [--dir DIR] [--scale F] [--stores abcde] [--requests N] [--keep]
//
//   a  10,000 runs as sweeps of 100 to 1,000 points, each with its config, tags, a start and
//      an end event, 20 logged steps and, for one run in ten, an alert
//   b  one run of 1,024 ranks x 100,000 logged steps
//   c  one run of 4,096 ranks x 20,000 logged steps
//   d  one run of a 64-expert MoE (4 MoE layers) logging its expert loads at 100,000 steps
//   e  one run of 16 ranks x 100,000 logged steps, for the spread across ranks that a chart of
//      every rank reads (store/metric_spread.h: one row a step of more than 8 ranks, so the
//      rows it reads grow with the steps, not the ranks); not in the default set
//
// --scale multiplies the steps of b, c, d and e (the ranks, experts and runs stay), so that a
// small machine can run the same shapes shorter; the output says the scale. Each store is
// written to DIR (default $TMPDIR or /tmp) and removed afterwards, or with --keep left there
// (its path printed) to profile a query against.
//
// Store e is timed in this process, without `kiln serve` (which it does not need): the p50 and
// p95 of --requests calls of store::spread_series over the whole run at 1,000 points.
//
// Over store a it times `kiln runs list` (every run, printed to /dev/null). It times
// `kiln tui` (in tmux): for store a from its start to the runs screen, from End to
// the last run in view and a compare of 10 runs; for b and c to the runs screen and then the
// run screen with its ranks. In headless Chromium (bench/pages_timing.mjs) the compare page
// of 10 runs over a and the run page over b, c and d: first paint and full chart (its loss
// line and the Ranks panel's heat strip on b and c, the experts heatmap on d). For a, the
// runs page (bench/runs_page_memory.mjs):
// its first rows, a scroll through every run, and the browser's memory after it.
//
// For each store it prints: bytes on disk (the store file after a WAL checkpoint) per
// rank-step (per run for a); the writer's sustained rank-rows per second, rank 0 handing it
// every rank's row of each step as the trainer's gather does and waiting only when the
// writer's queue is past half full (so nothing is thinned: the count of dropped rows is
// printed and must be 0); and for the API calls the dashboard's pages make, the p50 and p95
// of --requests timed GETs against `kiln serve` (the binary beside this one), and the
// server's peak resident memory.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/rank_row.h"
#include "store/database.h"
#include "store/metric_fields.h"
#include "store/metric_spread.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/sweep_writer.h"
#include "trainer/config/config.h"

namespace {

namespace fs = std::filesystem;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace kiln::store;
using kiln::bench::rank_row;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Options {
  std::string dir;
  double scale = 1.0;
  std::string stores = "abcd";
  int requests = 20;
  bool keep = false;
};

Options parse(int argc, char** argv) {
  Options o;
  const char* tmp = std::getenv("TMPDIR");
  o.dir = tmp && *tmp ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--dir") o.dir = value();
    else if (arg == "--scale") o.scale = std::stod(value());
    else if (arg == "--stores") o.stores = value();
    else if (arg == "--requests") o.requests = std::stoi(value());
    else if (arg == "--keep") o.keep = true;
    else throw std::runtime_error("unknown argument " + arg + " (see the comment atop bench/store_scale_benchmark.cpp)");
  }
  if (!(o.scale > 0 && o.scale <= 1)) throw std::runtime_error("--scale must be in (0, 1]");
  if (o.requests < 2) throw std::runtime_error("--requests must be at least 2");
  return o;
}

void remove_store(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

// The store file's size once its WAL is checkpointed into it.
int64_t store_bytes(const std::string& path) {
  open_store(path, Access::ReadWrite)->exec("PRAGMA wal_checkpoint(TRUNCATE)");
  return static_cast<int64_t>(fs::file_size(path));
}

// A run as kiln records it: the whole resolved config (every key, about 4 KB), as a trainer
// writes it, with this learning rate.
RunInfo run_info(const std::string& name, int world_size, double lr = 3e-4) {
  RunInfo info;
  info.name = name;
  kiln::Config config;
  config.train.lr = lr;
  info.config_json = kiln::config_to_json(config).dump();
  info.layout = "tp8.pp4.dp" + std::to_string(std::max(1, world_size / 32));
  info.backend = "cuda";
  info.device = "NVIDIA H100 80GB HBM3";
  info.host = "node0";
  info.world_size = world_size;
  return info;
}

struct WriteFigures {
  int64_t rank_steps = 0;
  double seconds = 0;
  int64_t dropped = 0;
};

// One run of `ranks` ranks logging every step, as rank 0's writer takes it.
WriteFigures write_rank_run(const std::string& path, const std::string& name, int ranks, int64_t steps) {
  WriterOptions options;
  options.heartbeat_interval_s = 0;
  RunWriter writer(path, options);
  writer.create_run(run_info(name, ranks));
  const Clock::time_point start = Clock::now();
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<MetricRow> rows;
    rows.reserve(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) rows.push_back(rank_row(step, r));
    // Never let the queue thin: wait while it is past half of its rows.
    while (writer.stats().queued_rows > options.max_queued_rows / 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    writer.log_metrics(std::move(rows));
  }
  writer.flush();
  WriteFigures f{ranks * steps, seconds_since(start), writer.stats().dropped_rows};
  writer.finish(RunStatus::Completed);
  writer.close();
  return f;
}

// 10,000 runs as sweeps of 100 to 1,000 points.
WriteFigures write_many_runs(const std::string& path) {
  const std::vector<int> sweep_sizes = {100, 200, 300, 400, 500, 600, 700, 800, 900, 1000,
                                        1000, 900, 800, 700, 600, 500, 400, 300, 200, 100};
  const Clock::time_point start = Clock::now();
  int64_t runs = 0;
  for (size_t s = 0; s < sweep_sizes.size(); ++s) {
    NewSweep sweep;
    sweep.name = fmt::format("sweep-{:02}", s);
    sweep.spec_json = R"({"base":{},"grid":{"train.lr":[]}})";
    sweep.host = "node0";
    for (int p = 0; p < sweep_sizes[s]; ++p) sweep.points.push_back(fmt::format(R"({{"train.lr":{}}})", 1e-4 * (p + 1)));
    const int64_t sweep_id = create_sweep(*open_store(path, Access::ReadWrite), sweep);
    for (int p = 0; p < sweep_sizes[s]; ++p) {
      const std::string name = fmt::format("{}-p{:04}", sweep.name, p);
      WriterOptions options;
      options.heartbeat_interval_s = 0;
      RunWriter writer(path, options);
      RunInfo info = run_info(name, 8, 1e-4 * (p + 1));
      info.sweep_id = sweep_id;
      info.sweep_point = p;
      info.tags = {"scale", p % 2 == 0 ? "even" : "odd"};
      writer.create_run(info);
      for (int64_t step = 1; step <= 20; ++step) writer.log_metrics({rank_row(step, 0)});
      if (p % 10 == 0) {
        Alert alert;
        alert.step = 20;
        alert.rule = "loss_spike";
        alert.value = 9.0;
        alert.threshold = 6.0;
        alert.message = "loss 9.0 at step 20 is 6 sigma above the last 100 steps";
        writer.log_alert(alert);
      }
      writer.finish(RunStatus::Completed);
      writer.close();
      set_point_run(*open_store(path, Access::ReadWrite), sweep_id, p, name);
      ++runs;
    }
    end_sweep(*open_store(path, Access::ReadWrite), sweep_id, SweepStatus::Ended);
  }
  return {runs, seconds_since(start), 0};
}

// A 64-expert MoE run's expert loads, 4 MoE layers, at every step.
WriteFigures write_expert_run(const std::string& path, int64_t steps) {
  WriterOptions options;
  options.heartbeat_interval_s = 0;
  RunWriter writer(path, options);
  writer.create_run(run_info("moe-64", 64));
  const Clock::time_point start = Clock::now();
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<ExpertLoad> loads;
    for (int layer = 1; layer <= 4; ++layer) {
      ExpertLoad load;
      load.step = step;
      load.layer = layer;
      for (int e = 0; e < 64; ++e) load.tokens.push_back(4096 + ((e * 37 + step * layer) % 512));
      load.aux_loss = 0.01;
      load.router_entropy = 4.1;
      loads.push_back(std::move(load));
    }
    writer.log_metrics({rank_row(step, 0)});
    while (writer.stats().queued_rows > options.max_queued_rows / 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    writer.log_expert_loads(std::move(loads));
  }
  writer.flush();
  WriteFigures f{steps, seconds_since(start), writer.stats().dropped_rows};
  writer.finish(RunStatus::Completed);
  writer.close();
  return f;
}

// `kiln serve` over a store, on a port of its own, until destroyed.
class Served {
 public:
  Served(const std::string& kiln, const std::string& path, int port) : port_(port) {
    std::fflush(stdout);  // or the child's copy of the buffer prints it again
    pid_ = fork();
    if (pid_ == 0) {
      const std::string listen = "127.0.0.1:" + std::to_string(port);
      std::freopen("/dev/null", "w", stdout);
      execl(kiln.c_str(), kiln.c_str(), "serve", "--store", path.c_str(), "--listen", listen.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // up to 10 s for the listener
      try {
        get("/api/metric-fields");
        return;
      } catch (const std::exception&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    throw std::runtime_error("kiln serve did not answer on port " + std::to_string(port));
  }
  ~Served() {
    sampling_ = false;
    if (sampler_.joinable()) sampler_.join();
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  // From now on, the server's resident memory every 2 ms, split as the kernel counts it: its
  // own (anonymous: heap, stacks, answers) and the store's pages it maps (file-backed, the
  // page cache's, which the kernel takes back under pressure).
  void sample_memory() {
    sampling_ = true;
    sampler_ = std::thread([this] {
      while (sampling_) {
        std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
        for (std::string line; std::getline(status, line);) {
          if (line.rfind("RssAnon:", 0) == 0) peak_anon_ = std::max<int64_t>(peak_anon_, std::stoll(line.substr(8)) * 1024);
          if (line.rfind("RssFile:", 0) == 0) peak_file_ = std::max<int64_t>(peak_file_, std::stoll(line.substr(8)) * 1024);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  int64_t peak_anon() const { return peak_anon_; }
  int64_t peak_file() const { return peak_file_; }
  // One GET; returns its body. A status other than 200 is an error.
  std::string get(const std::string& target) const {
    net::io_context io;
    beast::tcp_stream stream(io);
    stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)));
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, "127.0.0.1:" + std::to_string(port_));
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 30);
    http::read(stream, buffer, parser);
    const http::response<http::string_body>& response = parser.get();
    if (response.result() != http::status::ok)
      throw std::runtime_error(target + ": HTTP " + std::to_string(response.result_int()) + " " + response.body());
    return response.body();
  }
  // The server's peak resident memory, bytes (VmHWM).
  int64_t peak_rss() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int port_;
  std::atomic<bool> sampling_{false};
  std::atomic<int64_t> peak_anon_{0}, peak_file_{0};
  std::thread sampler_;
};

struct Latency {
  double p50_ms = 0, p95_ms = 0;
  size_t bytes = 0;
};

// The metrics call of the dashboard's run page (webui/run.js) of a run whose last step is
// `last_step`: every field it charts (the metric list's run charts and step split) and the
// tokens, at 2,000 points.
std::string run_page_charts_target(int64_t last_step) {
  std::string keys;
  for (const kiln::store::MetricField& field : kiln::store::kMetricFields)
    if (field.views & (kiln::store::kInRunChart | kiln::store::kInTimeSplit | kiln::store::kInTimeWithin))
      keys += std::string(field.name) + ",";
  return fmt::format("/api/runs/1/metrics?keys={}tokens&to={}&points=2000", keys, last_step);
}

// The q-quantile of times sorted ascending: the one at rank floor(q * n).
double quantile(const std::vector<double>& sorted_ms, double q) {
  return sorted_ms[std::min(sorted_ms.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted_ms.size())))];
}

// The p50 and p95 of `requests` calls of `call`, which returns the size of its answer.
template <class Call>
Latency time_calls(int requests, const Call& call) {
  std::vector<double> ms;
  size_t bytes = 0;
  for (int i = 0; i < requests; ++i) {
    const Clock::time_point start = Clock::now();
    bytes = call();
    ms.push_back(seconds_since(start) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return {quantile(ms, 0.5), quantile(ms, 0.95), bytes};
}

Latency time_gets(const Served& served, const std::string& target, int requests) {
  return time_calls(requests, [&] { return served.get(target).size(); });
}

// Store e's question: the spread of a per-rank field over the whole run at 1,000 points, as
// the server's chart of every rank asks it, timed in this process against the store file.
void report_spread(const std::string& path, int requests) {
  const std::unique_ptr<Database> db = open_store(path, Access::ReadOnly);
  fmt::print("  holds: {} metric_spread rows, {} spread_blocks rows\n", db->query_int("SELECT count(*) FROM metric_spread"),
             db->query_int("SELECT count(*) FROM spread_blocks"));
  size_t points = 0;
  const Latency l = time_calls(requests, [&] {
    points = spread_series(*db, 1, "fwd_ms", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                           1000).size();
    return points;
  });
  fmt::print("  {:<34} {:>10} {:>10} {:>12}\n", "in-process call", "p50 ms", "p95 ms", "points");
  fmt::print("  {:<34} {:>10.1f} {:>10.1f} {:>12}\n", "spread_series fwd_ms, 1000 points", l.p50_ms, l.p95_ms, points);
}

// The calls the dashboard's pages make, each against the 500 ms target, then `bulk`: calls no
// page makes, the most a script may ask, timed for the server's memory under them.
void report_api(const Served& served, const std::vector<std::pair<std::string, std::string>>& calls,
                const std::vector<std::pair<std::string, std::string>>& bulk, int requests) {
  fmt::print("  {:<34} {:>10} {:>10} {:>12}  {}\n", "API call (the page it serves)", "p50 ms", "p95 ms", "bytes", "target");
  for (const auto& [page, target] : calls) {
    const Latency l = time_gets(served, target, requests);
    fmt::print("  {:<34} {:>10.1f} {:>10.1f} {:>12}  p95 < 500 ms {}\n", page, l.p50_ms, l.p95_ms, l.bytes,
               l.p95_ms < 500 ? "pass" : "FAIL");
    std::fflush(stdout);
  }
  for (const auto& [what, target] : bulk) {
    const Latency l = time_gets(served, target, requests);
    fmt::print("  {:<34} {:>10.1f} {:>10.1f} {:>12}  no page asks it\n", what, l.p50_ms, l.p95_ms, l.bytes);
    std::fflush(stdout);
  }
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  fmt::print("  server peak resident memory: {:.1f} MiB; sampled every 2 ms, at most {:.1f} MiB its own (anonymous) "
             "and {:.1f} MiB of the store's mapped pages\n",
             mib(served.peak_rss()), mib(served.peak_anon()), mib(served.peak_file()));
}

// The output of a shell command.
std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + command);
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// One timed step of the TUI: the keys sent (tmux send-keys names; none for the start) and
// the text whose appearance ends it.
struct TuiStep {
  std::string label;
  std::string keys;
  std::string shows;
};

// `kiln tui` over a store in a detached tmux window of 160 x 50: each step's time from its
// keys (the first, from the start) to the screen showing its text, p50 and p95 over `repeats`
// starts.
void report_tui(const std::string& kiln, const std::string& path, const std::vector<TuiStep>& steps, int repeats) {
  std::string tmux;
  // The milliseconds from `start` to the screen showing `text`, or nothing after a minute.
  const auto wait_for = [&](const std::string& text, Clock::time_point start) -> std::optional<double> {
    while (seconds_since(start) < 60) {
      if (output_of(tmux + " capture-pane -p -t main").find(text) != std::string::npos) return seconds_since(start) * 1e3;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  };
  std::vector<std::vector<double>> ms(steps.size());
  for (int i = 0; i < repeats; ++i) {
    // A server of its own each start: a client that reaches the previous start's server
    // while kill-server is still taking it down fails with "server exited unexpectedly".
    tmux = fmt::format("tmux -L kiln-scale-{}-{} -f /dev/null", getpid(), i);
    for (size_t k = 0; k < steps.size(); ++k) {
      const Clock::time_point start = Clock::now();
      if (k == 0) {
        const std::string started = output_of(tmux + " new-session -d -s main -x 160 -y 50 \"env LC_ALL=C.UTF-8 " +
                                              kiln + " tui --store " + path + "; sleep 600\" 2>&1; echo $?");
        if (started != "0\n") {
          fmt::print("  TUI: tmux did not start: {}", started);
          return;
        }
      } else {
        std::system((tmux + " send-keys -t main " + steps[k].keys).c_str());
      }
      const std::optional<double> shown = wait_for(steps[k].shows, start);
      if (!shown) {
        fmt::print("  TUI: \"{}\" was not on the screen a minute after {}\n", steps[k].shows,
                   k == 0 ? "the start" : steps[k].keys);
        std::system((tmux + " kill-server").c_str());
        return;
      }
      ms[k].push_back(*shown);
    }
    std::system((tmux + " kill-server").c_str());
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    std::sort(ms[k].begin(), ms[k].end());
    const double p95 = quantile(ms[k], 0.95);
    fmt::print("  {:<34} {:>10.1f} {:>10.1f} {:>12}  p95 < 500 ms {}\n", steps[k].label, quantile(ms[k], 0.5), p95, "",
               p95 < 500 ? "pass" : "FAIL");
  }
}

// The most a metrics question may ask: a key of 1,024 ranks, every row of each. The server
// shares its points among the series (server_limits.h: kMaxAnswerPoints).
std::string largest_metrics_target() {
  std::vector<std::string> ranks;
  for (int rank = 0; rank < 1024; ++rank) ranks.push_back(std::to_string(rank));
  return fmt::format("/api/runs/1/metrics?keys=fwd_ms&ranks={}&points=0", fmt::join(ranks, ","));
}

std::string kiln_binary(const char* self) {
  const fs::path beside = fs::path(self).parent_path() / "kiln";
  if (!fs::exists(beside)) throw std::runtime_error("no kiln binary beside " + std::string(self));
  return fs::absolute(beside).string();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    // Every store but e is served by the kiln binary beside this one.
    const std::string kiln = o.stores.find_first_not_of('e') == std::string::npos ? "" : kiln_binary(argv[0]);
    fmt::print("kiln_bench_store_scale: --scale {} --stores {} --requests {}, stores in {}\n", o.scale, o.stores,
               o.requests, o.dir);
    int port = 18000 + static_cast<int>(getpid() % 1000);
    const auto steps = [&](int64_t full) { return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(full) * o.scale)); };
    for (const char which : o.stores) {
      const std::string path = fmt::format("{}/kiln_scale_{}_{}.db", o.dir, which, getpid());
      remove_store(path);
      WriteFigures f;
      std::vector<std::pair<std::string, std::string>> calls, bulk;
      if (which == 'a') {
        fmt::print("\n(a) 10,000 runs as 20 sweeps of 100 to 1,000 points\n");
        f = write_many_runs(path);
        fmt::print("  written in {:.1f} s: {:.0f} runs/s\n", f.seconds, static_cast<double>(f.rank_steps) / f.seconds);
        fmt::print("  on disk: {} bytes, {:.0f} bytes a run (20 logged steps each)\n", store_bytes(path),
                   static_cast<double>(store_bytes(path)) / static_cast<double>(f.rank_steps));
        // The runs page's first questions (a page of 100, then the menus' config keys), then
        // what a user asks next: another order, groups, a search, a far page with configs.
        calls = {{"runs table, first page", "/api/runs?limit=100"},
                 {"config keys (/api/config-keys)", "/api/config-keys"},
                 {"runs table by loss", "/api/runs?limit=100&sort=loss&order=asc"},
                 {"runs table grouped by train.lr", "/api/runs?limit=100&group=train.lr"},
                 {"runs table, search", "/api/runs?limit=100&q=sweep-07%20even"},
                 {"runs table, page 100 with configs", "/api/runs?limit=100&offset=9900&config=1"},
                 {"sweeps (/api/sweeps)", "/api/sweeps"},
                 {"a sweep of 1,000 (/api/sweeps/sweep-09)", "/api/sweeps/sweep-09"},
                 {"a run page (/api/runs/5000)", "/api/runs/5000"},
                 {"compare 10 runs", "/api/compare?runs=1,2,3,4,5,6,7,8,9,10"},
                 {"Prometheus scrape (/metrics)", "/metrics"}};
      } else if (which == 'b' || which == 'c') {
        const int ranks = which == 'b' ? 1024 : 4096;
        const int64_t n = steps(which == 'b' ? 100000 : 20000);
        fmt::print("\n({}) one run of {} ranks x {} logged steps\n", which, ranks, n);
        f = write_rank_run(path, fmt::format("ranks-{}", ranks), ranks, n);
        fmt::print("  written in {:.1f} s: {:.0f} rank-rows/s sustained, {} rows thinned\n", f.seconds,
                   static_cast<double>(f.rank_steps) / f.seconds, f.dropped);
        fmt::print("  rank 0 of a {}-rank run logging every step keeps up with steps of {:.1f} ms or longer\n", ranks,
                   1e3 * ranks * f.seconds / static_cast<double>(f.rank_steps));
        const int64_t bytes = store_bytes(path);
        fmt::print("  on disk: {} bytes, {:.1f} bytes a rank-step\n", bytes,
                   static_cast<double>(bytes) / static_cast<double>(f.rank_steps));
        calls = {{"run page (/api/runs/1)", "/api/runs/1"},
                 {"loss chart, rank 0, 1000 points", "/api/runs/1/metrics?keys=loss&ranks=0&points=1000"},
                 {"step time chart, every rank", "/api/runs/1/metrics?keys=fwd_ms&points=1000"},
                 {"ranks table (/ranks)", "/api/runs/1/ranks"},
                 {"rank heat strip (/rank-heat)", "/api/runs/1/rank-heat"},
                 {"run page's charts, 2000 points", run_page_charts_target(n)}};
        bulk = {{"1024 ranks' fwd_ms, every row", largest_metrics_target()}};
      } else if (which == 'd') {
        const int64_t n = steps(100000);
        fmt::print("\n(d) a 64-expert MoE run, 4 MoE layers, expert loads at {} steps\n", n);
        f = write_expert_run(path, n);
        fmt::print("  written in {:.1f} s: {:.0f} steps/s, {} rows thinned\n", f.seconds,
                   static_cast<double>(f.rank_steps) / f.seconds, f.dropped);
        const int64_t bytes = store_bytes(path);
        fmt::print("  on disk: {} bytes, {:.1f} bytes a step (4 layers x 64 experts and a metric row)\n", bytes,
                   static_cast<double>(bytes) / static_cast<double>(f.rank_steps));
        calls = {{"experts heatmap (/experts)", "/api/runs/1/experts"}, {"run page (/api/runs/1)", "/api/runs/1"}};
      } else if (which == 'e') {
        const int64_t n = steps(100000);
        fmt::print("\n(e) one run of 16 ranks x {} logged steps: the spread across ranks\n", n);
        f = write_rank_run(path, "ranks-16", 16, n);
        fmt::print("  written in {:.1f} s: {:.0f} rank-rows/s sustained, {} rows thinned\n", f.seconds,
                   static_cast<double>(f.rank_steps) / f.seconds, f.dropped);
        const int64_t bytes = store_bytes(path);
        fmt::print("  on disk: {} bytes, {:.1f} bytes a rank-step\n", bytes,
                   static_cast<double>(bytes) / static_cast<double>(f.rank_steps));
        report_spread(path, o.requests);
      } else {
        throw std::runtime_error(std::string("--stores takes the letters a, b, c, d and e, got ") + which);
      }
      if (!calls.empty()) {
        const int served_port = port++;
        Served served(kiln, path, served_port);
        served.sample_memory();
        report_api(served, calls, bulk, o.requests);
        // The runs page in a browser, from the repository's root (bench/store-scale.sh runs there).
        if (which == 'a' &&
            std::system(fmt::format("node bench/runs_page_memory.mjs http://127.0.0.1:{}/ sweep-19-p0099 sweep-00-p0000",
                                    served_port)
                            .c_str()) != 0)
          fmt::print("  runs page: bench/runs_page_memory.mjs failed (run from the repository's root)\n");
        // The chart pages in a browser: a compare of 10 runs over a; the run page (its heat
        // strip, or its experts heatmap) over b, c and d.
        const char* chart_pages = which == 'a' ? "compare" : which == 'd' ? "experts" : "ranks";
        if (std::system(fmt::format("node bench/pages_timing.mjs http://127.0.0.1:{}/ {}", served_port, chart_pages)
                            .c_str()) != 0)
          fmt::print("  chart pages: bench/pages_timing.mjs failed (run from the repository's root)\n");
        std::fflush(stdout);
      }
      const int starts = std::min(o.requests, 10);
      if (which == 'a') {
        // The CLI's whole list: every run's line, its latest step's means read run by run.
        const std::string list = fmt::format("{} runs list --store {} > /dev/null", kiln, path);
        const Latency listed = time_calls(starts, [&] {
          if (std::system(list.c_str()) != 0) throw std::runtime_error("`" + list + "` failed");
          return size_t{0};
        });
        fmt::print("  {:<34} {:>10.1f} {:>10.1f}\n", "kiln runs list (all 10,000 runs)", listed.p50_ms, listed.p95_ms);
        report_tui(kiln, path,
                   {{"TUI runs screen (kiln tui)", "", "sweep-19-p0099"},
                    {"TUI scrolled to the end", "End", "sweep-00-p0000"},
                    {"TUI compare of 10 marked runs", "Home Space Space Space Space Space Space Space Space Space Space c",
                     "compare 10 runs"}},
                   starts);
      }
      if (which == 'b' || which == 'c') {
        const std::string ranks = which == 'b' ? "1024" : "4096";
        report_tui(kiln, path,
                   {{"TUI runs screen (kiln tui)", "", "ranks-" + ranks},
                    {"TUI run screen with its ranks", "Enter", "ranks (" + ranks}},
                   starts);
      }
      if (o.keep) fmt::print("  kept: {}\n", path);
      else remove_store(path);
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln_bench_store_scale: {}\n", e.what());
    return 1;
  }
}
