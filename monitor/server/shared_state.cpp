#include "monitor/server/shared_state.h"

#include <utility>

namespace kiln::monitor {

SharedState::SharedState(ServerOptions options, const ListenAddress& address)
    : options_(std::move(options)),
      allowed_hosts_(address, options_.allowed_hosts),
      connections_(options_.max_connections),
      subscribers_(options_.max_subscribers),
      reads_(options_.store_path, store::Access::ReadOnly),
      writes_(options_.store_path, store::Access::ReadWrite),
      feeds_(reads_, options_.poll_interval) {}

bool SharedState::authorized(std::string_view authorization_header) const {
  if (options_.token.empty()) return true;
  const std::string expected = "Bearer " + options_.token;
  if (authorization_header.size() != expected.size()) return false;
  // Compared in full whatever the first difference, so timing does not reveal a prefix.
  unsigned char difference = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    difference |= static_cast<unsigned char>(authorization_header[i] ^ expected[i]);
  return difference == 0;
}

}  // namespace kiln::monitor
