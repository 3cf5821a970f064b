// A cap on sessions of one kind (HTTP connections, WebSocket subscribers): a session holds a
// Slot for its life, and one that cannot get one is refused, so a flood of clients costs the
// server a bounded number of sockets and buffers.
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
    explicit Slot(SessionSlots& slots) : slots_(&slots) {}
    Slot(Slot&& other) noexcept : slots_(other.slots_) { other.slots_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot() {
      if (slots_) slots_->taken_.fetch_sub(1);
    }

   private:
    SessionSlots* slots_;
  };

  // A slot, or none when `most` are taken. Callable from any thread.
  std::optional<Slot> take() {
    if (taken_.fetch_add(1) < most_) return std::optional<Slot>(std::in_place, *this);
    taken_.fetch_sub(1);
    return std::nullopt;
  }

  size_t most() const { return most_; }

 private:
  const size_t most_;
  std::atomic<size_t> taken_{0};
};

}  // namespace kiln::monitor
