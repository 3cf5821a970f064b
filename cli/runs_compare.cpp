// kiln runs compare: how two or more runs' configs differ, and how they trained.
#include <fmt/core.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/runs_command.h"
#include "cli/runs_format.h"
#include "store/json_rows.h"
#include "cli/runs_store.h"
#include "kernels/check.h"
#include "store/config_diff.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"

namespace kiln {
namespace {

using store::json_number;

using nlohmann::json;

struct CompareOptions {
  std::string store;
  std::vector<std::string> runs;
  double target_loss = 0;
  bool json = false;
};

struct Compared {
  std::vector<store::RunRecord> runs;
  std::vector<store::ConfigDifference> diff;
  std::vector<store::RunSummary> summaries;
};

// The runs as typed, resolved to distinct ids: comparing a run with itself is a typo.
std::vector<int64_t> resolve_distinct(store::Database& db, const std::vector<std::string>& typed) {
  if (typed.size() < 2)
    fail(fmt::format("compare needs at least two runs (got {})", typed.size()));
  std::vector<int64_t> ids;
  for (size_t i = 0; i < typed.size(); ++i) {
    const int64_t id = store::resolve_run(db, typed[i]);
    for (size_t j = 0; j < ids.size(); ++j)
      if (ids[j] == id)
        fail(fmt::format("compare: '{}' and '{}' are the same run (id {}); give distinct runs",
                         typed[j], typed[i], id));
    ids.push_back(id);
  }
  return ids;
}

Compared compare(store::Database& db, const std::vector<int64_t>& ids,
                 std::optional<double> target_loss) {
  Compared c;
  std::vector<std::string> configs;
  for (const int64_t id : ids) {
    c.runs.push_back(store::get_run(db, id));
    configs.push_back(c.runs.back().config_json);
    c.summaries.push_back(store::summarize_run(db, id, target_loss));
  }
  c.diff = store::config_diff(configs);
  return c;
}

// A config value as people read it: strings without their JSON quotes.
std::string config_value(const std::optional<std::string>& json_text) {
  if (!json_text) return kAbsent;
  const json value = json::parse(*json_text, nullptr, /*allow_exceptions=*/false);
  return value.is_string() ? value.get<std::string>() : *json_text;
}

std::string best_loss_text(const store::RunSummary& s) {
  if (std::isnan(s.best_loss)) return kAbsent;
  return fixed4(s.best_loss) + (s.best_step ? fmt::format(" @{}", *s.best_step) : "");
}

std::string target_text(const store::RunSummary& s) {
  if (!s.target_step) return "not reached";
  return fmt::format("{} (step {})", duration_or_absent(s.time_to_target_s), *s.target_step);
}

void print_tables(const Compared& c, std::optional<double> target_loss) {
  std::vector<Table::Column> columns{{"KEY"}};
  for (const auto& run : c.runs) columns.push_back({run.name});

  if (c.diff.empty()) {
    fmt::print("configs: identical\n");
  } else {
    fmt::print("config differences:\n");
    Table table(columns);
    for (const auto& d : c.diff) {
      std::vector<std::string> row{d.key};
      for (const auto& value : d.values) row.push_back(config_value(value));
      table.add(std::move(row));
    }
    table.print(stdout, 2);
  }

  columns.front().header = "";
  for (size_t k = 1; k < columns.size(); ++k) columns[k].align = Table::Align::Right;
  Table table(columns);
  const auto add = [&](std::string label, auto text_of) {
    std::vector<std::string> row{std::move(label)};
    for (const auto& s : c.summaries) row.push_back(text_of(s));
    table.add(std::move(row));
  };
  using S = store::RunSummary;
  add("status", [](const S& s) { return std::string(store::to_string(s.status)); });
  add("steps logged", [](const S& s) { return std::to_string(s.logged_steps); });
  add("last step", [](const S& s) {
    return s.last_step ? std::to_string(*s.last_step) : std::string(kAbsent);
  });
  add("final loss", [](const S& s) { return fixed4(s.final_loss); });
  add("best loss", best_loss_text);
  add("best valid loss", [](const S& s) { return fixed4(s.best_valid_loss); });
  add("mean tokens/s", [](const S& s) { return compact_rate(s.mean_tokens_per_s); });
  add("mean TFLOP/s", [](const S& s) {
    return std::isnan(s.mean_tflops) ? std::string(kAbsent) : fmt::format("{:.1f}", s.mean_tflops);
  });
  add("mean MFU", [](const S& s) { return percent(s.mean_mfu); });
  add("elapsed", [](const S& s) { return duration_or_absent(s.elapsed_s); });
  if (target_loss) add(fmt::format("time to loss {}", shortest(*target_loss)), target_text);
  fmt::print("\nsummary:\n");
  table.print(stdout, 2);
}

void print_json(const Compared& c, std::optional<double> target_loss) {
  json out;
  out["runs"] = json::array();
  for (const auto& run : c.runs) out["runs"].push_back({{"id", run.id}, {"name", run.name}});
  out["config_diff"] = json::array();
  for (const auto& d : c.diff) {
    json values = json::array();
    for (const auto& v : d.values) values.push_back(v ? json::parse(*v) : json());
    out["config_diff"].push_back({{"key", d.key}, {"values", values}});
  }
  out["summary"] = json::array();
  for (const auto& s : c.summaries) {
    out["summary"].push_back({{"id", s.run_id},
                              {"name", s.name},
                              {"status", std::string(store::to_string(s.status))},
                              {"logged_steps", s.logged_steps},
                              {"last_step", json_number(s.last_step)},
                              {"final_loss", json_number(s.final_loss)},
                              {"best_loss", json_number(s.best_loss)},
                              {"best_step", json_number(s.best_step)},
                              {"best_valid_loss", json_number(s.best_valid_loss)},
                              {"mean_tokens_per_s", json_number(s.mean_tokens_per_s)},
                              {"mean_tflops", json_number(s.mean_tflops)},
                              {"mean_mfu", json_number(s.mean_mfu)},
                              {"elapsed_s", json_number(s.elapsed_s)},
                              {"target_loss", json_number(target_loss)},
                              {"target_step", json_number(s.target_step)},
                              {"time_to_target_s", json_number(s.time_to_target_s)}});
  }
  fmt::print("{}\n", out.dump(2));
}

void runs_compare(const CompareOptions& options, std::optional<double> target_loss) {
  if (target_loss && !std::isfinite(*target_loss))
    fail(fmt::format("compare: --target-loss must be a finite number, got {}", *target_loss));
  const auto db = open_store_for_reading(options.store);
  const Compared c = compare(*db, resolve_distinct(*db, options.runs), target_loss);
  if (options.json)
    print_json(c, target_loss);
  else
    print_tables(c, target_loss);
}

}  // namespace

void add_runs_compare_command(CLI::App& runs) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* cmd = runs.add_subcommand(
      "compare", "Compare runs: config differences, losses, throughput, time to a target loss");
  cmd->add_option("runs", options->runs, "Two or more runs (id, name, or name prefix)")
      ->required();
  add_store_option(cmd, options->store);
  CLI::Option* target = cmd->add_option(
      "--target-loss", options->target_loss,
      "Also show how long each run took to first reach this training loss");
  cmd->add_flag("--json", options->json, "Print JSON instead of tables");
  cmd->callback([options, target] {
    runs_compare(*options, target->count() > 0 ? std::optional(options->target_loss)
                                               : std::nullopt);
  });
}

}  // namespace kiln
