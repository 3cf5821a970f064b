#include "monitor/server/live_feeds.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "base/check.h"
#include "monitor/server/api_reply.h"
#include "monitor/server/websocket_session.h"
#include "store/error.h"

namespace kiln::monitor {

LiveFeeds::LiveFeeds(const ServedStores& stores, std::chrono::milliseconds interval)
    : stores_(stores), interval_(interval) {}

void LiveFeeds::start(boost::asio::any_io_executor executor) {
  timer_ = std::make_unique<boost::asio::steady_timer>(executor);
  schedule();
}

void LiveFeeds::stop() { timer_.reset(); }

void LiveFeeds::schedule() {
  timer_->expires_after(interval_);
  timer_->async_wait([this](const boost::system::error_code& error) {
    if (error) return;  // cancelled: the server is stopping
    poll();
    schedule();
  });
}

void LiveFeeds::subscribe(const StoredRow& run, const std::shared_ptr<WebsocketSession>& session) {
  auto db = run.store->reads.borrow();
  std::lock_guard lock(mutex_);
  Feed& feed = feeds_[{run.store->index, run.id}];
  if (!feed.tail) feed.tail = std::make_unique<RunTail>(*db, *run.store, run.id);
  feed.subscribers.push_back(session);
  session->send(std::make_shared<const std::string>(feed.tail->hello()));
}

void LiveFeeds::poll() {
  std::lock_guard lock(mutex_);
  for (auto it = feeds_.begin(); it != feeds_.end();) {
    const size_t store = it->first.first;
    const auto end = feeds_.lower_bound({store + 1, std::numeric_limits<int64_t>::min()});
    try {
      auto db = stores_[store].reads.borrow();
      it = poll(*db, it, end);
    } catch (const ApiError&) {
      // No connection to this store could be opened (the process is out of file descriptors,
      // say): the next round tries again.
      it = end;
    }
  }
}

LiveFeeds::Feeds::iterator LiveFeeds::poll(store::Database& db, Feeds::iterator it, Feeds::iterator end) {
  while (it != end) {
    Feed& feed = it->second;
    std::erase_if(feed.subscribers, [](const auto& s) { return s.expired(); });
    if (feed.subscribers.empty()) {
      it = feeds_.erase(it);
      continue;
    }
    std::vector<std::string> messages;
    bool ended = false;
    try {
      messages = feed.tail->poll(db);
    } catch (const store::DatabaseError&) {
      // A busy store: the next round reads the same rows again.
    } catch (const Error& e) {
      // The run was removed while followed: say so, and follow it no more.
      messages.push_back(dump_json({{"type", "error"}, {"error", e.what()}}));
      ended = true;
    }
    for (std::string& text : messages) {
      const auto message = std::make_shared<const std::string>(std::move(text));
      for (const auto& weak : feed.subscribers)
        if (const auto session = weak.lock()) session->send(message);
    }
    it = ended ? feeds_.erase(it) : std::next(it);
  }
  return end;
}

std::vector<std::weak_ptr<WebsocketSession>> LiveFeeds::finish() {
  poll();
  std::lock_guard lock(mutex_);
  std::vector<std::weak_ptr<WebsocketSession>> sessions;
  for (auto& [run_id, feed] : feeds_)
    for (const auto& weak : feed.subscribers)
      if (const auto session = weak.lock()) {
        session->close();
        sessions.push_back(weak);
      }
  feeds_.clear();
  return sessions;
}

}  // namespace kiln::monitor
