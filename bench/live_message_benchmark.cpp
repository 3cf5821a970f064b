// The live WebSocket's messages for a wide run (bench/README.md, "Store and dashboard at
// scale"): a run of --ranks ranks a step, followed by the server's own RunTail; each of
// --steps steps is committed, polled, and its metrics message weighed. Prints the message's
// bytes, what a client's full queue of such messages (limits::kMaxQueuedMessages) would hold,
// and the poll's time (median and slowest).
//   build/kiln_bench_live_message [--ranks 4096] [--steps 20]
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench/rank_row.h"
#include "monitor/server/run_tail.h"
#include "monitor/server/served_stores.h"
#include "monitor/server/server_limits.h"
#include "store/run_writer.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

// A rank's row (bench/rank_row.h) at a time of its step.
store::MetricRow rank_row(int64_t step, int rank) {
  store::MetricRow row = bench::rank_row(step, rank);
  row.time = 1.7e9 + static_cast<double>(step);
  return row;
}

void log_step(store::RunWriter& writer, int64_t step, int ranks) {
  std::vector<store::MetricRow> rows;
  for (int r = 0; r < ranks; ++r) rows.push_back(rank_row(step, r));
  writer.log_metrics(std::move(rows));
  writer.flush();
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 4096, steps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--ranks") ranks = std::atoi(argv[i + 1]);
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
  }
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_live_message_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "runs.db").string();
  {
    store::RunWriter writer(path);
    store::RunInfo info;
    info.name = "wide";
    info.world_size = ranks;
    const int64_t run_id = writer.create_run(info);
    log_step(writer, 1, ranks);

    monitor::ServedStores stores(path, {});
    auto db = stores.first().reads.borrow();
    monitor::RunTail tail(*db, stores.first(), run_id);
    std::vector<size_t> sizes;
    std::vector<double> poll_ms;
    for (int64_t step = 2; step < 2 + steps; ++step) {
      log_step(writer, step, ranks);
      const Clock::time_point start = Clock::now();
      const std::vector<std::string> messages = tail.poll(*db);
      poll_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      for (const std::string& m : messages)
        if (nlohmann::json::parse(m)["type"] == "metrics") sizes.push_back(m.size());
    }
    std::sort(sizes.begin(), sizes.end());
    std::sort(poll_ms.begin(), poll_ms.end());
    if (sizes.empty()) {
      fmt::print("no metrics message in {} polls\n", steps);
      return 1;
    }
    const size_t full_queue = sizes.back() * monitor::limits::kMaxQueuedMessages;
    fmt::print("{} ranks, {} steps, one step a poll: metrics message {} to {} bytes ({:.1f} KiB)\n", ranks,
               sizes.size(), sizes.front(), sizes.back(), static_cast<double>(sizes.back()) / 1024);
    fmt::print("a client's queue of {} such messages: {:.1f} MiB\n", monitor::limits::kMaxQueuedMessages,
               static_cast<double>(full_queue) / (1 << 20));
    fmt::print("poll: median {:.2f} ms, slowest {:.2f} ms\n", poll_ms[poll_ms.size() / 2], poll_ms.back());
    writer.finish(store::RunStatus::Completed);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
