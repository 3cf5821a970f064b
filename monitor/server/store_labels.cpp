#include "monitor/server/store_labels.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/run_names.h"

namespace kiln::monitor {
namespace {

std::string stem_label(const std::string& path) {
  std::string label = std::filesystem::path(path).stem().string();
  std::replace_if(label.begin(), label.end(), [](char c) { return !is_run_name_char(c); }, '_');
  return label.empty() ? "store" : label;
}

}  // namespace

std::vector<std::string> store_labels(const std::vector<std::string>& paths) {
  std::vector<std::string> labels;
  std::set<std::string> taken;
  for (const std::string& path : paths) {
    const std::string stem = stem_label(path);
    std::string label = stem;
    for (int n = 2; taken.count(label); ++n) label = stem + "-" + std::to_string(n);
    taken.insert(label);
    labels.push_back(label);
  }
  return labels;
}

}  // namespace kiln::monitor
