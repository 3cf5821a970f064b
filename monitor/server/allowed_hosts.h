// The names a request's Host header may give (docs/security.md): the addresses the server
// listens on, the loopback names, and for every interface (0.0.0.0, ::) this machine's host
// name and addresses, plus the names given with --allow-host. A web page whose own DNS name
// was re-pointed at this machine (DNS rebinding) sends its name as the Host; refusing it
// keeps the page from reading the dashboard as if it were its own.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/server/listen_address.h"

namespace kiln::monitor {

class AllowedHosts {
 public:
  // A name that is not a bare host name (a port, a scheme, a path, a space) is a kiln::Error
  // naming it.
  AllowedHosts(const ListenAddress& address, const std::vector<std::string>& extra_names);

  // The Host header's value ("name", "name:port", "[::1]:port"); the port is not compared.
  bool allows(std::string_view host_header) const;

 private:
  std::vector<std::string> names_;  // lower case
  std::vector<boost::asio::ip::address> addresses_;
};

}  // namespace kiln::monitor
