// A Hugging Face config.json read field by field, as `kiln import` reads every class's
// (hf_config.cpp, hf_deepseek.cpp): a field absent or null takes the class's default, one of
// the wrong kind is refused in one line naming it.
#pragma once

#include <string>
#include <type_traits>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"

namespace kiln {

class HfFields {
 public:
  // Both are kept by reference: they must outlive the fields.
  HfFields(const nlohmann::json& config, const std::string& file) : config_(config), file_(file) {}

  template <typename T>
  T get(const char* key, T fallback) const {
    const auto it = config_.find(key);
    if (it == config_.end() || it->is_null()) return fallback;
    const bool ok = std::is_same_v<T, bool>       ? it->is_boolean()
                    : std::is_integral_v<T>       ? it->is_number_integer()
                    : std::is_floating_point_v<T> ? it->is_number()
                                                  : it->is_string();
    if (!ok) fail(fmt::format("import: {}: {} is {}, not a {}", file_, key, it->dump(), kind<T>()));
    return it->get<T>();
  }
  // An array-valued field (present() first).
  const nlohmann::json& array(const char* key) const {
    const nlohmann::json& value = config_.at(key);
    if (!value.is_array()) fail(fmt::format("import: {}: {} is {}, not an array", file_, key, value.dump()));
    return value;
  }
  // An object-valued field (present() first).
  const nlohmann::json& object(const char* key) const {
    const nlohmann::json& value = config_.at(key);
    if (!value.is_object()) fail(fmt::format("import: {}: {} is {}, not an object", file_, key, value.dump()));
    return value;
  }
  const nlohmann::json& config() const { return config_; }
  const std::string& file() const { return file_; }
  bool present(const char* key) const {
    const auto it = config_.find(key);
    return it != config_.end() && !it->is_null();
  }
  // Refuses a setting kiln does not compute: the value must be the one it computes.
  template <typename T>
  void require(const char* key, T fallback, T wanted, const std::string& why) const {
    if (get<T>(key, fallback) != wanted)
      fail(fmt::format("import: {}: {} is {}; {}", file_, key, config_.at(key).dump(), why));
  }

 private:
  template <typename T>
  static const char* kind() {
    if constexpr (std::is_same_v<T, bool>)
      return "boolean";
    else if constexpr (std::is_integral_v<T>)
      return "integer";
    else if constexpr (std::is_floating_point_v<T>)
      return "number";
    else
      return "string";
  }
  const nlohmann::json& config_;
  const std::string& file_;
};

}  // namespace kiln
