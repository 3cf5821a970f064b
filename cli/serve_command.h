#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "monitor/server/server.h"

namespace kiln {

// kiln serve [--store PATH] [--listen HOST:PORT] [--token TOKEN | --token-file PATH]: the
// dashboard over a run store, until Ctrl-C (docs/dashboard.md).
void add_serve_command(CLI::App& app);

// The dashboard server for a store: what `kiln serve` runs and `kiln train --serve` starts
// beside the training loop (beside_training: its threads at the lowest CPU priority). The
// token is resolve_token's (cli/server_token.h); "" for none. It binds the address here, so
// a port in use fails before anything else starts.
std::unique_ptr<monitor::Server> make_dashboard_server(const std::string& store_path,
                                                       const std::string& listen,
                                                       const std::string& token,
                                                       bool beside_training);

}  // namespace kiln
