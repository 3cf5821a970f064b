// A cap on sessions of one kind (HTTP connections, WebSocket subscribers): a session holds a
// Slot for its life, and one that cannot get one is refused, so a flood of clients costs the
// server a bounded number of sockets and buffers. A slot may be several units: the bytes of
// the answers the server holds while clients read them are capped the same way.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>

namespace kiln::monitor {

class SessionSlots {
 public:
  explicit SessionSlots(size_t most) : most_(most) {}
  SessionSlots(const SessionSlots&) = delete;
  SessionSlots& operator=(const SessionSlots&) = delete;

  class Slot {
   public:
    Slot(SessionSlots& slots, size_t units) : slots_(&slots), units_(units) {}
    Slot(Slot&& other) noexcept : slots_(other.slots_), units_(other.units_) { other.slots_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot() {
      if (slots_) slots_->taken_.fetch_sub(units_);
    }

   private:
    SessionSlots* slots_;
    size_t units_;
  };

  // A slot of `units`, or none when it would take more than `most` in all. Callable from any
  // thread.
  std::optional<Slot> take(size_t units = 1) {
    if (taken_.fetch_add(units) + units <= most_) return std::optional<Slot>(std::in_place, *this, units);
    taken_.fetch_sub(units);
    return std::nullopt;
  }

  size_t most() const { return most_; }

 private:
  const size_t most_;
  std::atomic<size_t> taken_{0};
};

}  // namespace kiln::monitor
