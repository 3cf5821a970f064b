#include "monitor/server/allowed_hosts.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "store/error.h"

namespace kiln::monitor {

namespace ip = boost::asio::ip;

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_host_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

// "127.0.0.1", "::1" or "[::1]" as an address; an IPv4 address written as IPv6
// (::ffff:127.0.0.1) as the IPv4 one, so it compares equal.
std::optional<ip::address> address_of(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  boost::system::error_code error;
  const ip::address address = ip::make_address(std::string(text), error);
  if (error) return std::nullopt;
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return ip::address(ip::make_address_v4(ip::v4_mapped, address.to_v6()));
  return address;
}

// The addresses of this machine's interfaces, for a server listening on all of them.
std::vector<ip::address> interface_addresses() {
  std::vector<ip::address> addresses;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return addresses;
  for (const ifaddrs* entry = list; entry; entry = entry->ifa_next) {
    if (!entry->ifa_addr) continue;
    if (entry->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      addresses.emplace_back(ip::address_v4(ntohl(in->sin_addr.s_addr)));
    } else if (entry->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      ip::address_v6::bytes_type bytes;
      std::copy(std::begin(in6->sin6_addr.s6_addr), std::end(in6->sin6_addr.s6_addr), bytes.begin());
      addresses.emplace_back(ip::address_v6(bytes));
    }
  }
  freeifaddrs(list);
  return addresses;
}

}  // namespace

AllowedHosts::AllowedHosts(const ListenAddress& address, const std::vector<std::string>& extra_names)
    : names_{"localhost"}, addresses_{*address_of(address.host.to_string())} {
  if (address.host.is_unspecified()) {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') names_.push_back(lower(name));
    for (const ip::address& own : interface_addresses()) addresses_.push_back(*address_of(own.to_string()));
  }
  for (const std::string& extra : extra_names) {
    if (const auto literal = address_of(extra)) {
      addresses_.push_back(*literal);
    } else if (is_host_name(extra)) {
      names_.push_back(lower(extra));
    } else {
      store::fail("--allow-host '" + extra +
                  "': give a host name or an IP address, without a scheme or a port (e.g. --allow-host "
                  "dashboard.example.org)");
    }
  }
}

bool AllowedHosts::allows(std::string_view host_header) const {
  std::string_view host = host_header;
  if (host.starts_with('[')) {
    host = host.substr(0, host.find(']') + 1);  // "[::1]:8080" -> "[::1]"
  } else {
    host = host.substr(0, host.find(':'));
  }
  // A fully qualified name may end in a dot; it names the same host.
  if (host.ends_with('.')) host.remove_suffix(1);
  if (const auto address = address_of(host))
    return address->is_loopback() || std::find(addresses_.begin(), addresses_.end(), *address) != addresses_.end();
  return std::find(names_.begin(), names_.end(), lower(host)) != names_.end();
}

}  // namespace kiln::monitor
