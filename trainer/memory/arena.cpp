#include "trainer/memory/arena.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

namespace {
constexpr size_t kAlignment = 64;
size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

size_t Arena::bytes() const { return base_ ? capacity_ : aligned(high_); }

Arena::~Arena() {
  if (base_) owner_->release(base_);
}

Tensor Arena::take(Shape shape, DType dtype) {
  Tensor t;
  t.shape = shape;
  t.dtype = dtype;
  t.device = device_;
  cursor_ = (cursor_ + kAlignment - 1) / kAlignment * kAlignment;
  if (base_) {
    KILN_CHECK(cursor_ + t.bytes() <= capacity_,
               "arena " + name_ + ": layout grew after it was sized");
    t.data = base_ + cursor_;
  }
  cursor_ += t.bytes();
  high_ = std::max(high_, cursor_);
  return t;
}

void Arena::allocate(Ops& ops) {
  KILN_CHECK(base_ == nullptr, "arena " + name_ + " allocated twice");
  capacity_ = aligned(high_);
  owner_ = &ops;
  device_ = ops.device();
  base_ = static_cast<char*>(ops.allocate(capacity_ == 0 ? kAlignment : capacity_));
  cursor_ = 0;
  high_ = 0;
}

void Arena::check_complete() const {
  KILN_CHECK(base_ != nullptr && aligned(high_) == capacity_,
             "arena " + name_ + ": second layout pass differs from the first");
}

}  // namespace kiln
