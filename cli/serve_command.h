#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cli/server_token.h"
#include "monitor/server/server.h"
#include "monitor/server/server_limits.h"

namespace kiln {

// kiln serve [--store PATH]... [--stores DIR] [--listen HOST:PORT] [dashboard options]: the
// dashboard over a run store, and read-only over any others beside it, until Ctrl-C
// (docs/dashboard.md).
void add_serve_command(CLI::App& app);

// The options `kiln serve` and `kiln train --serve` share: who may change runs, which host
// names the server answers to, and how many clients it takes at once.
struct DashboardOptions {
  TokenOptions token;
  std::vector<std::string> allowed_hosts;
  size_t max_connections = monitor::limits::kDefaultMaxConnections;
  size_t max_subscribers = monitor::limits::kDefaultMaxSubscribers;
};

// Adds --token, --token-file, --allow-host, --max-connections and --max-subscribers to a
// subcommand; with `needs`, each needs it.
void add_dashboard_options(CLI::App* command, DashboardOptions& options, CLI::Option* needs = nullptr);

// The dashboard server for a store: what `kiln serve` runs and `kiln train --serve` starts
// beside the training loop (beside_training: its threads at the lowest CPU priority), with
// any stores shown beside it read-only. The token is resolved here (cli/server_token.h). It
// binds the address here, so a port in use fails before anything else starts.
std::unique_ptr<monitor::Server> make_dashboard_server(const std::string& store_path, const std::string& listen,
                                                       const DashboardOptions& dashboard, bool beside_training,
                                                       const std::vector<std::string>& read_only_stores = {});

}  // namespace kiln
