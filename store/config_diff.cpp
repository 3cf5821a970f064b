#include "store/config_diff.h"

#include <map>
#include <nlohmann/json.hpp>

#include "store/error.h"

namespace kiln::store {

std::vector<ConfigDifference> config_diff(const std::vector<std::string>& configs) {
  // key -> value per config; flatten() gives JSON pointers ("/train/lr") for every leaf.
  std::map<std::string, std::vector<std::optional<std::string>>> table;
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto json = nlohmann::json::parse(configs[i], nullptr, false);
    if (json.is_discarded())
      fail("store: config " + std::to_string(i + 1) + " of the comparison is not valid JSON");
    const auto flat = json.flatten();  // items() refers into it: keep it alive
    for (const auto& [pointer, value] : flat.items()) {
      if (pointer.empty()) continue;  // an empty config flattens to one root null: no keys
      // "/train/lr" -> "train.lr" ("~1" and "~0" are a pointer's escapes for '/' and '~').
      std::string key;
      for (size_t k = 1; k < pointer.size(); ++k) {
        if (pointer[k] == '/') {
          key += '.';
        } else if (pointer[k] == '~' && k + 1 < pointer.size()) {
          key += pointer[++k] == '1' ? '/' : '~';
        } else {
          key += pointer[k];
        }
      }
      auto& row = table[key];
      row.resize(configs.size());
      row[i] = value.dump();
    }
  }
  std::vector<ConfigDifference> diff;
  for (auto& [key, values] : table) {
    bool same = true;
    for (const auto& v : values) same = same && v == values.front();
    if (!same) diff.push_back({key, std::move(values)});
  }
  return diff;
}

}  // namespace kiln::store
