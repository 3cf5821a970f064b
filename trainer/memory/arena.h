// Arenas: one allocation each, sized from the config before the first step, carved
// into tensors. A layout is carved twice: once with no memory to learn the size, once
// after allocate() to hand out real pointers, so the footprint is known (and printed)
// before any work and a step never allocates.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/ops.h"

namespace kiln {

class Arena {
 public:
  explicit Arena(std::string name) : name_(std::move(name)) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // Next tensor of the layout, aligned to 64 bytes. Its data is null until allocate().
  Tensor take(Shape shape, DType dtype);
  // Allocates what the first pass took and rewinds for the second pass.
  void allocate(Ops& ops);
  // After the second pass: checks it took exactly what the first pass did.
  void check_complete() const;
  // Takes the next tensors from the start again: they share memory with the ones taken
  // before (layers that take turns, recomputing their activations). The arena's size is the
  // furthest any pass reached.
  void rewind() { cursor_ = 0; }

  const std::string& name() const { return name_; }
  // What allocate() takes (or took): the layout's reach, rounded up to the alignment.
  size_t bytes() const;
  Device device() const { return device_; }

 private:
  std::string name_;
  Ops* owner_ = nullptr;
  Device device_ = Device::Cpu;
  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t cursor_ = 0;
  size_t high_ = 0;  // the furthest cursor_ of this pass
};

}  // namespace kiln
