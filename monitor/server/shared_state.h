// What every session of one server shares: its options, who may use it, the host names it
// answers to, the caps on sessions, the stores with their connections and the live feeds.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "monitor/server/allowed_hosts.h"
#include "monitor/server/connection_pool.h"
#include "monitor/server/listen_address.h"
#include "monitor/server/live_feeds.h"
#include "monitor/server/served_stores.h"
#include "monitor/server/server_limits.h"
#include "monitor/server/session_slots.h"
#include "monitor/server/token_access.h"

namespace kiln::monitor {

struct ServerOptions {
  // The store the server serves: its runs are read, steered and edited.
  std::string store_path;
  // Stores shown beside it, read-only: their runs are read as the first store's are, and
  // every change to one is refused (docs/dashboard.md#several-stores).
  std::vector<std::string> read_only_stores;
  // When set, every API request needs it: "Authorization: Bearer TOKEN", or for reads the
  // session cookie a browser gets for it (token_access.h).
  std::string token;
  // Host names (or addresses) the server answers to beside its own (--allow-host): the name
  // a reverse proxy forwards, say.
  std::vector<std::string> allowed_hosts;
  size_t max_connections = limits::kDefaultMaxConnections;  // HTTP connections at once
  size_t max_subscribers = limits::kDefaultMaxSubscribers;  // WebSocket clients at once
  size_t max_unsent_bytes = limits::kMaxUnsentBytes;  // answers and live messages not yet read
  // Checks a `set` command's "key=value" against the run's config JSON (a sane range, unless
  // the request says "force") and returns it normalised; a bad one is a kiln::Error. The CLI
  // hands in the trainer's own check, so the server accepts exactly what `kiln runs set`
  // does without including the trainer. Unset: passed through as typed.
  std::function<std::string(const std::string& assignment, const std::string& run_config_json, bool force)>
      normalize_setting;
  std::chrono::milliseconds poll_interval{200};
  size_t max_queued_messages = limits::kMaxQueuedMessages;  // per WebSocket client
  size_t max_queued_bytes = limits::kMaxQueuedBytes;  // per WebSocket client
  int threads = 2;
  // The server shares its process with a training run (`kiln train --serve`): its threads
  // run at the lowest CPU priority, so they take the time the run leaves idle and never
  // hold up the run's threads, which wait for each other at every op.
  bool beside_training = false;
};

class SharedState {
 public:
  // A bad --allow-host name is a kiln::Error, as are too many stores or one given twice.
  SharedState(ServerOptions options, const ListenAddress& address);

  const ServerOptions& options() const { return options_; }
  const AllowedHosts& allowed_hosts() const { return allowed_hosts_; }
  SessionSlots& connections() { return connections_; }
  SessionSlots& subscribers() { return subscribers_; }
  SessionSlots& unsent_bytes() { return unsent_bytes_; }
  const ServedStores& stores() const { return stores_; }
  LiveFeeds& feeds() { return feeds_; }

  const TokenAccess& access() const { return access_; }

 private:
  ServerOptions options_;
  TokenAccess access_;
  AllowedHosts allowed_hosts_;
  SessionSlots connections_;
  SessionSlots subscribers_;
  SessionSlots unsent_bytes_;
  ServedStores stores_;
  LiveFeeds feeds_;
};

}  // namespace kiln::monitor
