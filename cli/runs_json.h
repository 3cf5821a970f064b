// The store's rows as JSON for `kiln runs ... --json`. Times are Unix seconds; an absent or
// non-finite number is null, so the output is always valid JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "store/types.h"

namespace kiln {

nlohmann::json json_number(double value);
nlohmann::json json_number(const std::optional<double>& value);
nlohmann::json json_number(const std::optional<int64_t>& value);

// Every field of the record except the config (callers add it where it belongs).
nlohmann::json to_json(const store::RunRecord& run);
nlohmann::json to_json(const store::MetricRow& row);
nlohmann::json to_json(const store::Event& event);
nlohmann::json to_json(const store::Checkpoint& checkpoint);
nlohmann::json to_json(const store::Command& command);

}  // namespace kiln
