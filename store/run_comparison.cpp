#include "store/run_comparison.h"

#include <fmt/core.h>

#include <cmath>

#include "store/error.h"
#include "store/json_rows.h"
#include "store/run_queries.h"
#include "store/user_text.h"

namespace kiln::store {

using nlohmann::json;

std::vector<int64_t> resolve_distinct_runs(Database& db, const std::vector<std::string>& typed) {
  std::vector<int64_t> ids;
  std::vector<std::string> shown;
  if (typed.size() < 2) check_distinct_runs(typed, shown);
  for (const std::string& run : typed) {
    ids.push_back(resolve_run(db, run));
    shown.push_back(std::to_string(ids.back()));
  }
  check_distinct_runs(typed, shown);
  return ids;
}

void check_distinct_runs(const std::vector<std::string>& typed, const std::vector<std::string>& ids) {
  if (typed.size() < 2) fail(fmt::format("compare needs at least two runs (got {})", typed.size()));
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (ids[j] == ids[i])
        fail(fmt::format("compare: '{}' and '{}' are the same run (id {}); give distinct runs", typed[j], typed[i],
                         ids[i]));
}

RunComparison compare_runs(Database& db, const std::vector<int64_t>& ids,
                           std::optional<double> target_loss) {
  std::vector<ComparedRun> runs;
  for (const int64_t id : ids) runs.push_back({&db, id});
  return compare_runs(runs, target_loss);
}

RunComparison compare_runs(std::span<const ComparedRun> runs, std::optional<double> target_loss) {
  if (target_loss && !std::isfinite(*target_loss))
    fail(fmt::format("compare: the target loss must be a finite number, got {}", *target_loss));
  RunComparison c;
  c.target_loss = target_loss;
  std::vector<std::string> configs;
  for (const ComparedRun& run : runs) {
    c.runs.push_back(get_run(*run.db, run.id));
    configs.push_back(redact_config_json(c.runs.back().config_json));
    c.summaries.push_back(summarize_run(*run.db, run.id, target_loss));
  }
  c.diff = config_diff(configs);
  return c;
}

json to_json(const RunComparison& c) {
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
                              {"status", std::string(to_string(s.status))},
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
                              {"target_loss", json_number(c.target_loss)},
                              {"target_step", json_number(s.target_step)},
                              {"time_to_target_s", json_number(s.time_to_target_s)}});
  }
  return out;
}

}  // namespace kiln::store
