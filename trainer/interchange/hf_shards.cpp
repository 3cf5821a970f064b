#include "trainer/interchange/hf_shards.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/trim.h"

namespace kiln {
namespace {

int64_t tensor_bytes(const TensorInfo& t) { return t.shape.numel() * static_cast<int64_t>(dtype_size(t.dtype)); }

}  // namespace

int64_t parse_shard_size(const std::string& text) {
  const auto refuse = [&] {
    fail("export: --max-shard-size \"" + text +
         "\" is not a size: a number above 0 and KB, MB, GB or TB (powers of 1000, as transformers' "
         "max_shard_size), e.g. 5GB");
  };
  const std::string_view size = trim_blanks(text);
  if (size.size() < 3) refuse();
  std::string unit(size.substr(size.size() - 2));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const double scale = unit == "KB" ? 1e3 : unit == "MB" ? 1e6 : unit == "GB" ? 1e9 : unit == "TB" ? 1e12 : 0;
  const std::string number(trim_blanks(size.substr(0, size.size() - 2)));
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  const bool digits_only = number.find_first_not_of("0123456789.") == std::string::npos;
  if (scale == 0 || !digits_only || end != number.c_str() + number.size() || !(value > 0)) refuse();
  const double bytes = std::floor(value * scale);  // transformers' int(value * multiplier)
  if (bytes < 1 || bytes > 9e18) refuse();
  return static_cast<int64_t>(bytes);
}

std::vector<HfShard> plan_hf_shards(const std::vector<TensorInfo>& tensors, int64_t max_bytes) {
  std::vector<HfShard> shards;
  HfShard current;
  int64_t current_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t bytes = tensor_bytes(tensors[i]);
    if (bytes > max_bytes) {
      shards.push_back({"", {i}});
      continue;
    }
    if (current_bytes + bytes > max_bytes && !current.tensors.empty()) {
      shards.push_back(std::move(current));
      current = {};
      current_bytes = 0;
    }
    current.tensors.push_back(i);
    current_bytes += bytes;
  }
  if (!current.tensors.empty()) shards.push_back(std::move(current));
  const size_t n = shards.size();
  for (size_t s = 0; s < n; ++s)
    shards[s].file = n == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n);
  return shards;
}

std::string hf_shard_index(const std::vector<TensorInfo>& tensors, const std::vector<HfShard>& shards) {
  int64_t parameters = 0, bytes = 0;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const HfShard& shard : shards) {
    for (size_t i : shard.tensors) {
      parameters += tensors[i].shape.numel();
      bytes += tensor_bytes(tensors[i]);
      weight_map[tensors[i].name] = shard.file;
    }
  }
  const nlohmann::json index = {{"metadata", {{"total_parameters", parameters}, {"total_size", bytes}}},
                                {"weight_map", weight_map}};
  return index.dump(2) + "\n";
}

}  // namespace kiln
