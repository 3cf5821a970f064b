#include "store/process_gone.h"

#include <signal.h>

#include <cerrno>

namespace kiln::store {

bool process_gone(const std::string& host, std::optional<int64_t> pid, const std::string& this_host) {
  if (!pid || host.empty() || host != this_host) return false;
  return ::kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH;
}

}  // namespace kiln::store
