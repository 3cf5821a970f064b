// The store's rows as JSON, for everything that hands them to people or programs: `kiln runs
// ... --json`, `kiln runs export --format json`, the dashboard's API. Times are Unix seconds;
// an absent or non-finite number is null, so the output is always valid JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "store/metric_fields.h"
#include "store/run_details.h"
#include "store/types.h"

namespace kiln::store {

// JSON text that is valid whatever bytes the store holds: a store written before text was
// checked at the door may hold invalid UTF-8 in a note, and one such note must not make the
// whole history unreadable, so bad bytes come out as U+FFFD. indent as nlohmann's dump.
std::string dump_json(const nlohmann::json& value, int indent = -1);

nlohmann::json json_number(double value);
nlohmann::json json_number(const std::optional<double>& value);
nlohmann::json json_number(const std::optional<int64_t>& value);

// Every field of the record except the config, which callers add where it belongs (it is
// large, and a list of runs rarely wants it).
nlohmann::json to_json(const RunRecord& run);
// The config_json text parsed, its secrets hidden (user_text.h redact_config_json); text that
// is not JSON is kept as a string.
nlohmann::json config_json(const RunRecord& run);
// Every field of the metric list (store/metric_fields.h); integers stay integers, an absent
// value is null.
nlohmann::json to_json(const MetricRow& row);
// The metric list itself, for the dashboard (GET /api/metric-fields): per field its name,
// type, unit, ranks ("same" or "per_rank"), views, title and description.
nlohmann::json metric_fields_json();
// One field of a row as to_json writes it.
nlohmann::json metric_json(const MetricRow& row, const MetricField& field);
nlohmann::json to_json(const ValidRow& row);
nlohmann::json to_json(const SystemRow& row);
nlohmann::json to_json(const Sample& sample);
// {"step", "layer", "tokens": [...], "dropped": [...] ([] when none), "aux_loss",
// "router_entropy", "imbalance"}: the imbalance as the store derives it (expert_load.h).
nlohmann::json to_json(const ExpertLoad& load);
nlohmann::json to_json(const Event& event);
nlohmann::json to_json(const Checkpoint& checkpoint);
nlohmann::json to_json(const Command& command);
// Its fields, with "losses": {"step": [...], "time": [...], "loss": [...]}, rank 0's at the
// steps it abandoned, as columns.
nlohmann::json to_json(const Rewind& rewind);
// The run with its config, latest_metrics, latest_valid, latest_sample, latest_experts (each
// MoE layer's latest load; [] for a dense model), events, checkpoints, commands and rewinds.
nlohmann::json to_json(const RunDetails& details);

}  // namespace kiln::store
