// kiln sweep list and kiln sweep show: the sweeps of a store, and one sweep's points compared.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/runs_format.h"
#include "cli/runs_store.h"
#include "cli/sweep_command.h"
#include "base/terminal_text.h"
#include "monitor/format/figures.h"
#include "store/json_rows.h"
#include "store/sweep_json.h"
#include "store/sweep_queries.h"

namespace kiln {
namespace {

struct ViewOptions {
  std::string store;
  std::string sweep;
  bool json = false;
};

// A parameter's value as the table shows it: text without its JSON quotes.
std::string param_text(const nlohmann::json& params, const std::string& key) {
  if (!params.contains(key)) return kAbsent;
  const nlohmann::json& value = params[key];
  return value.is_string() ? value.get<std::string>() : value.dump();
}

void sweep_show(const ViewOptions& options) {
  const auto db = open_store_for_reading(options.store);
  const int64_t id = store::resolve_sweep(*db, options.sweep);
  if (!options.json) {
    print_sweep_points(*db, id);
    return;
  }
  fmt::print("{}\n", store::dump_json(store::to_json(store::sweep_details(*db, id)), 2));
}

void sweep_list(const ViewOptions& options) {
  const auto db = open_store_for_reading(options.store);
  const std::vector<store::SweepSummary> sweeps = store::list_sweeps(*db);
  if (options.json) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& s : sweeps) array.push_back(store::to_json(s));
    fmt::print("{}\n", store::dump_json(array, 2));
    return;
  }
  if (sweeps.empty()) {
    fmt::print("no sweeps in {} yet; `kiln sweep` records one\n", db->path());
    return;
  }
  using A = Table::Align;
  Table table({{"ID", A::Right}, {"NAME"}, {"STATE"}, {"POINTS", A::Right}, {"LAUNCHED", A::Right},
               {"COMPLETED", A::Right}, {"RUNNING", A::Right}, {"FAILED", A::Right}, {"CREATED"}});
  for (const auto& s : sweeps)
    table.add({std::to_string(s.id), s.name, std::string(store::to_string(s.status)), std::to_string(s.points),
               std::to_string(s.launched), std::to_string(s.completed), std::to_string(s.running),
               std::to_string(s.failed), local_minute(s.created_at)});
  table.print(stdout);
}

}  // namespace

void print_sweep_points(store::Database& db, int64_t sweep_id) {
  const store::SweepDetails details = store::sweep_details(db, sweep_id);
  const auto best = store::best_point(details.points);
  using A = Table::Align;
  std::vector<Table::Column> columns{{""}, {"POINT", A::Right}};
  for (const std::string& key : details.parameters) columns.push_back({key, A::Right});
  for (const char* header : {"RUN", "STATUS"}) columns.push_back({header});
  for (const char* header : {"STEP", "LOSS", "BEST", "VALID", "TOK/S"}) columns.push_back({header, A::Right});
  Table table(columns);
  for (const auto& p : details.points) {
    const nlohmann::json params = nlohmann::json::parse(p.params_json, nullptr, false);
    std::vector<std::string> cells{best && best->point == p.point ? "*" : "", std::to_string(p.point)};
    for (const std::string& key : details.parameters) cells.push_back(param_text(params, key));
    cells.push_back(p.run_name.empty() ? kAbsent : p.run_name);
    cells.push_back(p.run_name.empty() ? "pending" : std::string(store::to_string(p.status)));
    cells.push_back(p.last_step ? std::to_string(*p.last_step) : kAbsent);
    for (double value : {p.final_loss, p.best_loss, p.final_valid_loss}) cells.push_back(fixed4(value));
    cells.push_back(compact_rate(p.tokens_per_s));
    table.add(std::move(cells));
  }
  fmt::print("sweep {} (id {}): {}, {} points, {} completed\n", terminal_line(details.sweep.name), details.sweep.id,
             store::to_string(details.sweep.status), details.sweep.points, details.sweep.completed);
  table.print(stdout);
  if (best)
    fmt::print("{} (*): point {}, {} {}\n", store::best_label(*best), best->point,
               best->metric == "final_valid_loss" ? "final valid loss" : "final loss", fixed4(best->value));
}

void add_sweep_view_commands(CLI::App& sweep) {
  auto options = std::make_shared<ViewOptions>();
  CLI::App* list = sweep.add_subcommand("list", "List the sweeps of a store, newest first");
  add_store_option(list, options->store);
  list->add_flag("--json", options->json, "Print a JSON array instead of a table");
  list->callback([options] { sweep_list(*options); });

  CLI::App* show = sweep.add_subcommand("show", "One sweep's points and their runs' losses, the best marked");
  show->add_option("sweep", options->sweep, "The sweep: its id, its name, or a prefix of one name")->required();
  add_store_option(show, options->store);
  show->add_flag("--json", options->json, "Print JSON instead of a table");
  show->callback([options] { sweep_show(*options); });
}

}  // namespace kiln
