// kiln runs list: the runs of a store, newest first, as a table or JSON.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/runs_command.h"
#include "cli/runs_format.h"
#include "cli/runs_store.h"
#include "base/check.h"
#include "monitor/format/figures.h"
#include "store/json_rows.h"
#include "store/run_overview.h"
#include "store/run_queries.h"
#include "store/sweep_queries.h"

namespace kiln {
namespace {

constexpr size_t kDeviceWidth = 28;  // a GPU's full name fits; a CPU's long one is cut

struct ListOptions {
  std::string store;
  std::string status;
  std::string tag;
  std::string name;
  std::string since;
  std::string sweep;
  std::vector<std::string> where;  // KEY=VALUE of the config
  int limit = 0;
  bool json = false;
};

store::RunFilter make_filter(store::Database& db, const ListOptions& options, double now) {
  if (options.limit < 0) fail(fmt::format("--limit must be 0 (all) or more, got {}", options.limit));
  store::RunFilter filter;
  if (!options.status.empty()) filter.status = store::parse_run_status(options.status);
  filter.tag = options.tag;
  filter.name_contains = options.name;
  if (!options.since.empty()) filter.since = parse_since(options.since, now);
  if (!options.sweep.empty()) filter.sweep_id = store::resolve_sweep(db, options.sweep);
  for (const std::string& match : options.where) filter.config.push_back(store::parse_config_match(match));
  filter.limit = options.limit;
  return filter;
}

std::string device_text(const store::RunRecord& run) {
  std::string text = run.backend;
  if (!run.device.empty()) text += (text.empty() ? "" : " ") + run.device;
  if (text.empty()) return kAbsent;
  if (text.size() > kDeviceWidth) text = text.substr(0, kDeviceWidth - 3) + "...";
  return text;
}

// With --sweep, a POINT column after NAME: each run's point in the sweep.
void print_table(const std::vector<store::RunOverview>& runs, bool with_point) {
  using A = Table::Align;
  std::vector<Table::Column> columns{{"ID", A::Right},
               {"NAME"},
               {"STATUS"},
               {"TAGS"},
               {"LAYOUT"},
               {"DEVICE"},
               {"STEP", A::Right},
               {"LOSS", A::Right},
               {"TOK/S", A::Right},
               {"MFU", A::Right},
               {"STARTED"},
               {"DURATION", A::Right}};
  if (with_point) columns.insert(columns.begin() + 2, {"POINT", A::Right});
  Table table(columns);
  for (const auto& r : runs) {
    const store::RunRecord& run = r.run;
    std::vector<std::string> cells{std::to_string(run.id), run.name, std::string(store::to_string(run.status)),
               run.tags.empty() ? kAbsent : join(run.tags, ","),
               run.layout.empty() ? kAbsent : run.layout, device_text(run), steps_text(r),
               fixed4(r.loss), compact_rate(r.tokens_per_s), percent(r.mfu),
               local_minute(run.started_at.value_or(run.created_at)),
               duration_or_absent(r.duration_s)};
    if (with_point) cells.insert(cells.begin() + 2, run.sweep_point ? std::to_string(*run.sweep_point) : kAbsent);
    table.add(std::move(cells));
  }
  table.print(stdout);
}

void print_json(const std::vector<store::RunOverview>& runs) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& r : runs) array.push_back(to_json(r));
  fmt::print("{}\n", store::dump_json(array, 2));
}

bool store_has_runs(store::Database& db) {
  store::RunFilter any;
  any.limit = 1;
  return !store::list_runs(db, any).empty();
}

void runs_list(const ListOptions& options) {
  const auto db = open_store_for_reading(options.store);
  const double now = store::unix_now();
  std::vector<store::RunOverview> runs;
  for (auto& run : store::list_runs(*db, make_filter(*db, options, now)))
    runs.push_back(store::run_overview(*db, std::move(run), now));
  if (options.json) {
    print_json(runs);
  } else if (!runs.empty()) {
    print_table(runs, !options.sweep.empty());
  } else if (!store_has_runs(*db)) {
    fmt::print("no runs in {} yet; `kiln train` records one\n", db->path());
  } else {
    fmt::print("no runs in {} match the filters\n", db->path());
  }
}

}  // namespace

void add_runs_list_command(CLI::App& runs) {
  auto options = std::make_shared<ListOptions>();
  CLI::App* cmd = runs.add_subcommand("list", "List runs, newest first");
  add_store_option(cmd, options->store);
  cmd->add_option("--status", options->status,
                  "Only runs with this status: created, running, paused, completed, stopped, "
                  "failed, lost");
  cmd->add_option("--tag", options->tag, "Only runs with this tag");
  cmd->add_option("--name", options->name, "Only runs whose name contains this text");
  cmd->add_option("--since", options->since,
                  "Only runs created since: 2026-11-20, 2026-11-20T14:00, or an age: 30m, 2h, 3d");
  cmd->add_option("--sweep", options->sweep, "Only the runs of this sweep (its id or name), with their points");
  cmd->add_option("--where", options->where,
                  "Only runs whose config holds this value: KEY=VALUE, e.g. train.lr=0.001 (repeatable: all hold)");
  cmd->add_option("--limit", options->limit, "At most this many runs (0: all)");
  cmd->add_flag("--json", options->json, "Print a JSON array instead of a table");
  cmd->callback([options] { runs_list(*options); });
}

}  // namespace kiln
