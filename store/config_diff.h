// The config part of `kiln runs compare`: which keys differ between runs' configs.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln::store {

struct ConfigDifference {
  std::string key;  // dotted path, e.g. "train.lr" or "data.paths.0"
  std::vector<std::optional<std::string>> values;  // per config, as JSON text; absent: nullopt
};

// The leaf keys whose values are not the same in every config, in key order. Each
// argument is one run's config_json; text that is not JSON is an error.
std::vector<ConfigDifference> config_diff(const std::vector<std::string>& configs);

}  // namespace kiln::store
