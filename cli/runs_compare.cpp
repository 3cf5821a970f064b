// kiln runs compare: how two or more runs' configs differ, and how they trained.
#include <fmt/core.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/runs_command.h"
#include "cli/runs_format.h"
#include "cli/runs_store.h"
#include "base/check.h"
#include "monitor/format/config_text.h"
#include "monitor/format/figures.h"
#include "store/json_rows.h"
#include "store/run_comparison.h"

namespace kiln {
namespace {

struct CompareOptions {
  std::string store;
  std::vector<std::string> runs;
  double target_loss = 0;
  bool json = false;
};

std::string best_loss_text(const store::RunSummary& s) {
  if (std::isnan(s.best_loss)) return kAbsent;
  return fixed4(s.best_loss) + (s.best_step ? fmt::format(" @{}", *s.best_step) : "");
}

std::string target_text(const store::RunSummary& s) {
  if (!s.target_step) return "not reached";
  return fmt::format("{} (step {})", duration_or_absent(s.time_to_target_s), *s.target_step);
}

void print_tables(const store::RunComparison& c) {
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
  if (c.target_loss) add(fmt::format("time to loss {}", shortest(*c.target_loss)), target_text);
  fmt::print("\nsummary:\n");
  table.print(stdout, 2);
}

void runs_compare(const CompareOptions& options, std::optional<double> target_loss) {
  const auto db = open_store_for_reading(options.store);
  const store::RunComparison c =
      store::compare_runs(*db, store::resolve_distinct_runs(*db, options.runs), target_loss);
  if (options.json)
    fmt::print("{}\n", store::dump_json(to_json(c), 2));
  else
    print_tables(c);
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
