// The scale an FP8 tensor is cast with, from its amax: one formula for the host recipe
// (trainer/precision/fp8_scaling.h) and the device's current scaling (kernels/cuda/fp8.cu).
// scale = fp8_max / amax / 2^margin; a zero or non-finite amax, or a scale a float cannot
// hold (a tiny amax), leaves the scale as it was.
#pragma once

#include "kernels/host_device.h"

namespace kiln {

// fp8_max: the format's largest finite value (448 for E4M3, 57344 for E5M2).
KILN_HOST_DEVICE inline float fp8_scale_from_amax(float amax, double fp8_max, int margin, float previous) {
  if (!(amax > 0) || amax > 3.402823466e38f) return previous;  // zero, NaN or infinite
  const double scale = fp8_max / static_cast<double>(amax) / static_cast<double>(1ull << margin);
  return scale <= 3.402823466e38 ? static_cast<float>(scale) : previous;
}

}  // namespace kiln
