// The runs that WebSocket clients follow. One RunTail per followed run polls the store on a
// timer (every 200 ms by default, so a commit reaches clients well within 500 ms) and hands
// each new message to every subscriber of that run; a run nobody follows is not polled.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "monitor/server/connection_pool.h"
#include "monitor/server/run_tail.h"

namespace kiln::monitor {

class WebsocketSession;

class LiveFeeds {
 public:
  LiveFeeds(ConnectionPool& reads, std::chrono::milliseconds interval);

  // Polls on this executor until stop(), which is called once that executor's threads have
  // stopped (it drops the timer, which must not outlive its context).
  void start(boost::asio::any_io_executor executor);
  void stop();

  // The session gets the run's hello now and every message after it. Sessions leave by
  // going away (they are held weakly).
  void subscribe(int64_t run_id, const std::shared_ptr<WebsocketSession>& session);

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

  void schedule();
  void poll(store::Database& db);

  ConnectionPool& reads_;
  std::chrono::milliseconds interval_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  // Held while a feed's messages go out, so a subscriber joining meanwhile gets a hello
  // that matches exactly the messages that follow it.
  std::mutex mutex_;
  std::map<int64_t, Feed> feeds_;
};

}  // namespace kiln::monitor
