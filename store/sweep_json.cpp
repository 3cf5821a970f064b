#include "store/sweep_json.h"

#include <string>

#include "store/json_rows.h"
#include "store/user_text.h"

namespace kiln::store {
namespace {

// Text stored as JSON, parsed; text that is not JSON is kept as a string.
nlohmann::json parsed(const std::string& text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? nlohmann::json(text) : value;
}

}  // namespace

nlohmann::json to_json(const SweepSummary& s) {
  return {{"id", s.id},
          {"name", s.name},
          {"created_at", s.created_at},
          {"heartbeat_at", json_number(s.heartbeat_at)},
          {"ended_at", json_number(s.ended_at)},
          {"status", to_string(s.status)},
          {"points", s.points},
          {"launched", s.launched},
          {"completed", s.completed},
          {"running", s.running},
          {"failed", s.failed},
          {"spec", parsed(redact_config_json(s.spec_json))},
          {"command_line", s.command_line},
          {"workdir", s.workdir},
          {"host", s.host}};
}

nlohmann::json to_json(const SweepPointRow& p) {
  const bool launched = !p.run_name.empty();
  return {{"point", p.point},
          {"params", parsed(p.params_json)},
          {"run_id", json_number(p.run_id)},
          {"run_name", launched ? nlohmann::json(p.run_name) : nlohmann::json()},
          {"status", launched ? std::string(to_string(p.status)) : "pending"},
          {"last_step", json_number(p.last_step)},
          {"steps", json_number(p.steps)},
          {"final_loss", json_number(p.final_loss)},
          {"best_loss", json_number(p.best_loss)},
          {"final_valid_loss", json_number(p.final_valid_loss)},
          {"best_valid_loss", json_number(p.best_valid_loss)},
          {"tokens_per_s", json_number(p.tokens_per_s)}};
}

nlohmann::json to_json(const SweepDetails& d) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& point : d.points) points.push_back(to_json(point));
  nlohmann::json best = nullptr;
  if (const auto b = best_point(d.points))
    best = {{"point", b->point},         {"metric", b->metric},
            {"value", json_number(b->value)}, {"partial", b->partial},
            {"last_step", json_number(b->last_step)}, {"steps", json_number(b->steps)},
            {"label", best_label(*b)}};
  return {{"sweep", to_json(d.sweep)}, {"parameters", d.parameters}, {"points", points}, {"best", best}};
}

}  // namespace kiln::store
