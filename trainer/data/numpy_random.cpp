#include "trainer/data/numpy_random.h"

#include <string>

#include "base/check.h"

namespace kiln {
namespace {

uint32_t checked_seed(uint64_t seed) {
  KILN_CHECK(seed <= 0xffffffffULL, "data: seed " + std::to_string(seed) +
                                        " is outside [0, 2^32 - 1], the seeds numpy (and so "
                                        "Megatron's dataset order) accepts");
  return static_cast<uint32_t>(seed);
}

}  // namespace

NumpyRandomState::NumpyRandomState(uint64_t seed) : engine_(checked_seed(seed)) {}

uint64_t NumpyRandomState::interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  uint64_t value;
  if (max <= 0xffffffffULL) {
    do value = engine_() & mask;
    while (value > max);
  } else {
    do {
      const uint64_t high = engine_();
      value = ((high << 32) | engine_()) & mask;
    } while (value > max);
  }
  return value;
}

}  // namespace kiln
