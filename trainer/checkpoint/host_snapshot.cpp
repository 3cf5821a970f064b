#include "trainer/checkpoint/host_snapshot.h"

#include <cstring>
#include <utility>

namespace kiln {
namespace {

// Each copy starts on a cache line of its own.
constexpr size_t kSnapshotAlignment = 64;

size_t source_bytes(const TensorSource& source) {
  return static_cast<size_t>(source.info.shape.numel()) * dtype_size(source.info.dtype);
}

// The bytes a copy takes in the snapshot, up to the next copy's start.
size_t snapshot_slot_bytes(size_t bytes) {
  return (bytes + kSnapshotAlignment - 1) / kSnapshotAlignment * kSnapshotAlignment;
}

}  // namespace

HostSnapshot::~HostSnapshot() {
  if (memory_) ops_.release_host(memory_);
}

void HostSnapshot::reserve(const CheckpointSources& sources) {
  size_t total = 0;
  for (const auto* list : {&sources.model, &sources.optimizer})
    for (const TensorSource& source : *list) total += snapshot_slot_bytes(source_bytes(source));
  // A run's tensors keep their shapes: the memory is allocated once.
  if (total <= capacity_) return;
  if (memory_) ops_.release_host(memory_);
  memory_ = nullptr;
  capacity_ = 0;
  memory_ = static_cast<std::byte*>(ops_.allocate_host(total));
  capacity_ = total;
}

void HostSnapshot::take(const CheckpointSources& sources) {
  reserve(sources);
  copies_ = {};
  size_t offset = 0;
  for (const auto& [list, copies] : {std::pair{&sources.model, &copies_.model},
                                     std::pair{&sources.optimizer, &copies_.optimizer}}) {
    for (const TensorSource& source : *list) {
      std::byte* copy = memory_ + offset;
      const size_t bytes = source_bytes(source);
      source.read(copy);
      copies->push_back({source.info, [copy, bytes](void* host) { std::memcpy(host, copy, bytes); }});
      offset += snapshot_slot_bytes(bytes);
    }
  }
}

}  // namespace kiln
