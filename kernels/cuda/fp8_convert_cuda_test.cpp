// The host FP8 conversions against CUDA's own (cuda_fp8.h, called on the host: no GPU needed),
// over every 4099th float bit pattern (normals, subnormals, infinities, NaNs of both signs)
// and every code.
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/fp8_convert.h"

namespace kiln {
namespace {

TEST(Fp8ConvertAgainstCuda, BitForBitBothWays) {
  for (const auto& [format, kind] : {std::pair{Fp8Format::E4M3, __NV_E4M3}, std::pair{Fp8Format::E5M2, __NV_E5M2}}) {
    int64_t differ = 0;
    for (uint64_t pattern = 0; pattern < (uint64_t{1} << 32); pattern += 4099) {
      const auto bits = static_cast<uint32_t>(pattern);
      float x;
      std::memcpy(&x, &bits, sizeof x);
      const uint8_t want = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind);
      if (float_to_fp8(x, format) != want && differ++ < 5)
        ADD_FAILURE() << "encoding " << x << " (0x" << std::hex << bits << "): cuda 0x" << int{want} << ", kiln 0x"
                      << int{float_to_fp8(x, format)};
    }
    EXPECT_EQ(differ, 0);
    for (int code = 0; code < 256; ++code) {
      const float want = __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), kind)));
      const float got = fp8_to_float(static_cast<uint8_t>(code), format);
      EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << "code " << code << ": " << got << " vs " << want;
    }
  }
}

}  // namespace
}  // namespace kiln
