// Moving values between host doubles and a tensor of any floating dtype on any device:
// initialisation writes parameters this way, and losses and logits come back this way.
#pragma once

#include <vector>

#include "kernels/ops.h"

namespace kiln {

void copy_from_doubles(Ops& ops, const Tensor& dst, const std::vector<double>& values);
std::vector<double> copy_to_doubles(Ops& ops, const Tensor& src);
// Host bytes holding `count` floating values of `dtype` (F64, F32, BF16 or F16), widened.
std::vector<double> doubles_from_bytes(const void* bytes, DType dtype, int64_t count);

}  // namespace kiln
