#include "cli/store_path.h"

#include <cstdlib>

namespace kiln {

std::string resolve_store_path(const std::string& flag, const std::string& config_path) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("KILN_STORE"); env && *env) return env;
  if (!config_path.empty()) return config_path;
  return kDefaultStorePath;
}

}  // namespace kiln
