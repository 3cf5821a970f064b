#include "monitor/server/shared_state.h"

#include <utility>

namespace kiln::monitor {

SharedState::SharedState(ServerOptions options, const ListenAddress& address)
    : options_(std::move(options)),
      access_(options_.token),
      allowed_hosts_(address, options_.allowed_hosts),
      connections_(options_.max_connections),
      subscribers_(options_.max_subscribers),
      reads_(options_.store_path, store::Access::ReadOnly),
      writes_(options_.store_path, store::Access::ReadWrite),
      feeds_(reads_, options_.poll_interval) {}

}  // namespace kiln::monitor
