#include "cli/serve_command.h"

#include <fmt/core.h>

#include <cstdio>

#include "cli/runs_store.h"
#include "cli/store_path.h"
#include "trainer/steer/setting.h"

namespace kiln {
namespace {

struct ServeOptions {
  std::string store;
  std::string listen = monitor::kDefaultListen;
  DashboardOptions dashboard;
};

// A `set` command is checked by the same parser the run applies it with, and against the
// run's config as `kiln runs set` checks it.
std::string normalize_setting(const std::string& assignment, const std::string& run_config_json, bool force) {
  return checked_setting(assignment, run_config_json, force, "send \"force\": true to set it anyway");
}

void serve(const ServeOptions& options) {
  open_store_for_reading(options.store);  // a missing or foreign file is refused up front
  const auto server = make_dashboard_server(resolve_store_path(options.store), options.listen, options.dashboard, false);
  server->run_until_signal([&] {
    fmt::print("kiln: serving {} at {} (Ctrl-C stops)\n", resolve_store_path(options.store), server->url());
    std::fflush(stdout);
  });
}

}  // namespace

std::unique_ptr<monitor::Server> make_dashboard_server(const std::string& store_path, const std::string& listen,
                                                       const DashboardOptions& dashboard, bool beside_training) {
  monitor::ServerOptions options;
  options.beside_training = beside_training;
  options.store_path = store_path;
  options.token = resolve_token(dashboard.token);
  options.allowed_hosts = dashboard.allowed_hosts;
  options.max_connections = dashboard.max_connections;
  options.max_subscribers = dashboard.max_subscribers;
  options.normalize_setting = normalize_setting;
  return std::make_unique<monitor::Server>(monitor::parse_listen_address(listen), std::move(options));
}

void add_dashboard_options(CLI::App* command, DashboardOptions& options, CLI::Option* needs) {
  add_token_options(command, options.token, needs);
  CLI::Option* hosts = command
                           ->add_option("--allow-host", options.allowed_hosts,
                                        "A host name the dashboard also answers to, beside its own addresses "
                                        "and localhost: the name a reverse proxy forwards (repeat for several)")
                           ->take_all()
                           ->allow_extra_args(false);
  CLI::Option* connections = command
                                 ->add_option("--max-connections", options.max_connections,
                                              "HTTP connections the dashboard serves at once (default 256)")
                                 ->check(CLI::PositiveNumber);
  CLI::Option* subscribers = command
                                 ->add_option("--max-subscribers", options.max_subscribers,
                                              "Live (WebSocket) clients the dashboard serves at once (default 128)")
                                 ->check(CLI::PositiveNumber);
  if (needs)
    for (CLI::Option* option : {hosts, connections, subscribers}) option->needs(needs);
}

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the dashboard (web UI and JSON API) over a run store");
  add_store_option(cmd, options->store);
  cmd->add_option("--listen", options->listen, "HOST:PORT to listen on (default 127.0.0.1:8080)");
  add_dashboard_options(cmd, options->dashboard);
  cmd->callback([options] { serve(*options); });
}

}  // namespace kiln
