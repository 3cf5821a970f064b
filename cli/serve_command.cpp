#include "cli/serve_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "base/check.h"
#include "cli/runs_store.h"
#include "cli/store_path.h"
#include "store/store_folder.h"
#include "trainer/steer/setting.h"

namespace kiln {
namespace {

struct ServeOptions {
  std::vector<std::string> stores;  // --store, in order: the first served, the rest read-only
  std::string folder;               // --stores DIR: every *.db in it, read-only after those
  std::string listen = monitor::kDefaultListen;
  DashboardOptions dashboard;
};

// A `set` command is checked by the same parser the run applies it with, and against the
// run's config as `kiln runs set` checks it.
std::string normalize_setting(const std::string& assignment, const std::string& run_config_json, bool force) {
  return checked_setting(assignment, run_config_json, force, "send \"force\": true to set it anyway");
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return a == b || (std::filesystem::equivalent(a, b, ec) && !ec);
}

// The stores in the order the server takes them: each --store, then --stores DIR's files
// (those already given as --store left out); without either, the one store of
// resolve_store_path. Bounded before any is opened.
std::vector<std::string> store_paths(const ServeOptions& options) {
  if (options.stores.empty() && options.folder.empty()) return {resolve_store_path("")};
  std::vector<std::string> paths = options.stores;
  if (!options.folder.empty())
    for (const std::string& path : store::stores_in_folder(options.folder, monitor::limits::kMaxStores))
      if (std::none_of(options.stores.begin(), options.stores.end(),
                       [&](const std::string& given) { return same_file(given, path); }))
        paths.push_back(path);
  if (paths.size() > monitor::limits::kMaxStores)
    fail(fmt::format("store: {} stores given; kiln serve shows at most {} at once", paths.size(),
                     monitor::limits::kMaxStores));
  return paths;
}

// "runs.db at URL", or with several stores "runs.db (runs), and read-only b.db (b), c.db (c)
// at URL": the labels their runs go by.
std::string serving_line(const monitor::Server& server, const std::vector<std::string>& paths) {
  if (paths.size() == 1) return fmt::format("{} at {}", paths.front(), server.url());
  const monitor::ServedStores& stores = server.stores();
  std::string text = fmt::format("{} ({}), and read-only", stores[0].path, stores[0].label);
  for (size_t i = 1; i < stores.size(); ++i)
    text += fmt::format("{} {} ({})", i == 1 ? "" : ",", stores[i].path, stores[i].label);
  return text + " at " + server.url();
}

void serve(const ServeOptions& options) {
  const std::vector<std::string> paths = store_paths(options);
  // A missing, foreign or newer file is refused up front, in one line, with nothing written.
  for (const std::string& path : paths) open_store_for_reading(path);
  const auto server = make_dashboard_server(paths.front(), options.listen, options.dashboard, false,
                                            {paths.begin() + 1, paths.end()});
  server->run_until_signal([&] {
    fmt::print("kiln: serving {} (Ctrl-C stops)\n", serving_line(*server, paths));
    std::fflush(stdout);
  });
}

}  // namespace

std::unique_ptr<monitor::Server> make_dashboard_server(const std::string& store_path, const std::string& listen,
                                                       const DashboardOptions& dashboard, bool beside_training,
                                                       const std::vector<std::string>& read_only_stores) {
  monitor::ServerOptions options;
  options.beside_training = beside_training;
  options.store_path = store_path;
  options.read_only_stores = read_only_stores;
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
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve the dashboard (web UI and JSON API) over a run store, and read-only over any others beside it");
  cmd->add_option("--store", options->stores,
                  "Run store file (default: $KILN_STORE, else ./kiln-runs.db). Repeat it to show several "
                  "stores as one list: the first is served as ever, its runs steered and edited; the others "
                  "are read-only, their runs addressed as LABEL:RUN, LABEL each file's name without .db")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--stores", options->folder,
                  "A folder of run stores: every *.db directly in it, by name, read-only after any --store "
                  "(the first of them served, without --store); at most " +
                      std::to_string(monitor::limits::kMaxStores) + " stores in all");
  cmd->add_option("--listen", options->listen, "HOST:PORT to listen on (default 127.0.0.1:8080)");
  add_dashboard_options(cmd, options->dashboard);
  cmd->callback([options] { serve(*options); });
}

}  // namespace kiln
