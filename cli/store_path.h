// Which store file a command uses: --store PATH, else $KILN_STORE, else (for kiln train) the
// config's store.path, else ./kiln-runs.db. A flag beats the environment, which beats the
// config file, as with most command-line tools.
#pragma once

#include <string>

namespace kiln {

inline constexpr const char* kDefaultStorePath = "kiln-runs.db";

std::string resolve_store_path(const std::string& flag, const std::string& config_path = "");

}  // namespace kiln
