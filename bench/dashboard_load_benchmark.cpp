// The dashboard under load (bench/README.md): a training run with `kiln train --serve`, once
// alone and once with WebSocket clients following it and a steady rate of API requests;
// prints both runs' steps/s, the slowdown, and whether every client received every row.
//   build/kiln_bench_dashboard [--clients 100] [--rps 20] [--steps 300] [--repeats 2]
//                              [-- kiln train args]
// The two kinds of run alternate, --repeats times each, and each kind's best run counts:
// other work on the machine only ever slows a run down.
#include <fmt/core.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/schema.h"

namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using nlohmann::json;

struct Options {
  int clients = 100;
  int rps = 20;
  int steps = 300;
  int repeats = 2;
  std::string train_args;
};

// One WebSocket client: the steps of rank 0's rows it received after its hello.
class Follower : public std::enable_shared_from_this<Follower> {
 public:
  Follower(net::io_context& io, uint16_t port, std::string run) : ws_(io), port_(port), run_(std::move(run)) {}
  void start() {
    beast::get_lowest_layer(ws_).connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_));
    ws_.handshake("127.0.0.1", "/api/runs/" + run_ + "/live");
    read();
  }
  int64_t start_step = -1;
  std::vector<int64_t> steps;

 private:
  void read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code error, size_t) {
      if (error) return;
      const json message = json::parse(beast::buffers_to_string(self->buffer_.data()));
      self->buffer_.consume(self->buffer_.size());
      if (message["type"] == "hello") self->start_step = message["last_step"].is_null() ? -1 : message["last_step"].get<int64_t>();
      if (message["type"] == "metrics")
        for (const json& row : message["rows"])
          if (row["rank"] == 0) self->steps.push_back(row["step"].get<int64_t>());
      self->read();
    });
  }
  beast::websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buffer_;
  uint16_t port_;
  std::string run_;
};

int http_get(uint16_t port, const std::string& target) {
  net::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  beast::http::request<beast::http::empty_body> request(beast::http::verb::get, target, 11);
  request.set(beast::http::field::host, "127.0.0.1");
  beast::http::write(stream, request);
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> response;
  beast::http::read(stream, buffer, response);
  return response.result_int();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Result {
  double steps_per_s = 0;
  std::vector<int64_t> logged;  // rank 0's steps in the store
};

// Steps per second between the 10th logged step and the last, from the rows' times.
Result measure(const std::string& store_path, const std::string& name) {
  auto db = kiln::store::open_store(store_path, kiln::store::Access::ReadOnly);
  std::vector<kiln::store::MetricRow> rows;
  kiln::store::for_each_metric(*db, kiln::store::resolve_run(*db, name), [&](const kiln::store::MetricRow& row) {
    if (row.rank == 0) rows.push_back(row);
  });
  Result result;
  for (const auto& row : rows) result.logged.push_back(row.step);
  const auto& first = rows.at(std::min<size_t>(10, rows.size() - 2));
  const auto& last = rows.back();
  result.steps_per_s = static_cast<double>(last.step - first.step) / (last.time - first.time);
  return result;
}

Result train(const Options& options, const std::string& dir, const std::string& name, bool loaded) {
  const std::string store = dir + "/runs.db", log = dir + "/" + name + ".log";
  const std::string command = fmt::format(
      "exec build/kiln train --store {} --name {} --serve 127.0.0.1:0 --set train.steps={} "
      "--set train.log_interval=1 --set train.eval_interval=0 --set train.sample_tokens=0 {} > {} 2>&1",
      store, name, options.steps, options.train_args, log);
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  static const std::regex url("dashboard: http://127.0.0.1:([0-9]+)/");
  std::smatch match;
  std::string text;
  while (!std::regex_search(text = read_file(log), match, url)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto port = static_cast<uint16_t>(std::stoi(match[1]));

  net::io_context io;
  std::vector<std::shared_ptr<Follower>> followers;
  std::atomic<bool> done = false;
  std::thread client_thread, api_thread;
  std::atomic<int> api_requests = 0, api_failures = 0;
  if (loaded) {
    for (int i = 0; i < options.clients; ++i) {
      followers.push_back(std::make_shared<Follower>(io, port, name));
      followers.back()->start();
    }
    client_thread = std::thread([&] { io.run(); });
    api_thread = std::thread([&] {
      const std::string targets[] = {"/api/runs", "/api/runs/" + name, "/api/runs/" + name + "/metrics?keys=loss,lr&points=500", "/metrics"};
      for (int i = 0; !done; ++i) {
        const auto next = std::chrono::steady_clock::now() + std::chrono::microseconds(1000000 / options.rps);
        bool ok = false;
        try {
          ok = http_get(port, targets[i % 4]) == 200;
        } catch (const std::exception&) {
        }
        // The server closes as the run ends, a moment before waitpid sees the process gone:
        // a request refused then is not a failure.
        if (!ok) std::this_thread::sleep_for(std::chrono::seconds(2));
        if (!ok && !done) ++api_failures;
        ++api_requests;
        std::this_thread::sleep_until(next);
      }
    });
  }
  int status = 0;
  waitpid(pid, &status, 0);
  done = true;
  if (loaded) {
    api_thread.join();
    client_thread.join();
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("kiln train failed: " + read_file(log));
  Result result = measure(store, name);
  if (loaded) {
    int complete = 0;
    for (const auto& f : followers) {
      std::vector<int64_t> expected;
      for (const int64_t step : result.logged)
        if (step > f->start_step) expected.push_back(step);
      complete += f->steps == expected;
    }
    fmt::print("  {} clients, {} of them received every row after their hello; {} API requests, {} failed\n",
               options.clients, complete, api_requests.load(), api_failures.load());
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--clients" && i + 1 < argc) options.clients = std::stoi(argv[++i]);
    else if (arg == "--rps" && i + 1 < argc) options.rps = std::stoi(argv[++i]);
    else if (arg == "--steps" && i + 1 < argc) options.steps = std::stoi(argv[++i]);
    else if (arg == "--repeats" && i + 1 < argc) options.repeats = std::stoi(argv[++i]);
    else if (arg == "--") for (++i; i < argc; ++i) options.train_args += std::string(" '") + argv[i] + "'";
    else {
      std::fprintf(stderr, "usage: kiln_bench_dashboard [--clients N] [--rps N] [--steps N] [--repeats N] [-- kiln train args]\n");
      return 2;
    }
  }
  const std::string dir = std::filesystem::temp_directory_path() / ("kiln_bench_dashboard_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  fmt::print("tiny config, {} steps logged every step; alone, then with {} WebSocket clients and {} API requests/s\n",
             options.steps, options.clients, options.rps);
  double alone = 0, loaded = 0;
  for (int r = 0; r < options.repeats; ++r) {
    const double a = train(options, dir, fmt::format("alone-{}", r), false).steps_per_s;
    fmt::print("  alone: {:.2f} steps/s\n", a);
    const double l = train(options, dir, fmt::format("loaded-{}", r), true).steps_per_s;
    fmt::print("  loaded: {:.2f} steps/s\n", l);
    alone = std::max(alone, a);
    loaded = std::max(loaded, l);
  }
  fmt::print("best alone {:.2f} steps/s, best loaded {:.2f} steps/s: slowdown {:.2f}% (target: at most 2%)\n",
             alone, loaded, 100 * (1 - loaded / alone));
  std::filesystem::remove_all(dir);
  return 0;
}
