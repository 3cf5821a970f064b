// bf16 and fp16 to and from float on the host, bit-exact with CUDA's conversions
// (round to nearest even), for copying mixed-precision tensors in and out of a device.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln {

inline uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_f16(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

inline float f16_to_float(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

}  // namespace kiln
