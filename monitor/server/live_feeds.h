// The runs that WebSocket clients follow, in any of the server's stores. One RunTail per
// followed run polls its store on a timer (every 200 ms by default, so a commit reaches
// clients well within 500 ms) and hands each new message to every subscriber of that run; a
// run nobody follows is not polled, and a round reads each store with one connection of its own.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "monitor/server/run_address.h"
#include "monitor/server/run_tail.h"
#include "monitor/server/served_stores.h"

namespace kiln::monitor {

class WebsocketSession;

class LiveFeeds {
 public:
  LiveFeeds(const ServedStores& stores, std::chrono::milliseconds interval);

  // Polls on this executor until stop(), which is called once that executor's threads have
  // stopped (it drops the timer, which must not outlive its context).
  void start(boost::asio::any_io_executor executor);
  void stop();

  // The session gets the run's hello now and every message after it. Sessions leave by
  // going away (they are held weakly).
  void subscribe(const StoredRow& run, const std::shared_ptr<WebsocketSession>& session);

  // One round: every followed run's new rows to its subscribers. The timer calls it; tests
  // may too.
  void poll();

  // A last round, then every subscriber sends what it has queued and closes. Returns the
  // sessions, so the server can wait for them to finish before stopping.
  std::vector<std::weak_ptr<WebsocketSession>> finish();

 private:
  struct Feed {
    std::unique_ptr<RunTail> tail;
    std::vector<std::weak_ptr<WebsocketSession>> subscribers;
  };
  // (the store's index, the run's id): a store's feeds lie together, in the stores' order.
  using Key = std::pair<size_t, int64_t>;
  using Feeds = std::map<Key, Feed>;

  void schedule();
  // Polls the feeds from `it` up to `end`, all of one store, with a connection of it; returns
  // `end`.
  Feeds::iterator poll(store::Database& db, Feeds::iterator it, Feeds::iterator end);

  const ServedStores& stores_;
  std::chrono::milliseconds interval_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  // Held while a feed's messages go out, so a subscriber joining meanwhile gets a hello
  // that matches exactly the messages that follow it.
  std::mutex mutex_;
  Feeds feeds_;
};

}  // namespace kiln::monitor
