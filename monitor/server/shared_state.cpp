#include "monitor/server/shared_state.h"

#include <utility>

namespace kiln::monitor {

SharedState::SharedState(ServerOptions options, const ListenAddress& address)
    : options_(std::move(options)),
      access_(options_.token),
      allowed_hosts_(address, options_.allowed_hosts),
      connections_(options_.max_connections),
      subscribers_(options_.max_subscribers),
      unsent_bytes_(options_.max_unsent_bytes),
      stores_(options_.store_path, options_.read_only_stores),
      feeds_(stores_, options_.poll_interval) {}

}  // namespace kiln::monitor
