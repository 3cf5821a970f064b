#include "trainer/memory/host_copy.h"

#include <cstdint>

#include "base/check.h"
#include "kernels/half_convert.h"

namespace kiln {

void copy_from_doubles(Ops& ops, const Tensor& dst, const std::vector<double>& values) {
  KILN_CHECK(static_cast<int64_t>(values.size()) == dst.numel(), "copy: element counts differ");
  switch (dst.dtype) {
    case DType::F64: ops.copy_from_host(dst, values.data()); return;
    case DType::F32: {
      const std::vector<float> narrow(values.begin(), values.end());
      ops.copy_from_host(dst, narrow.data());
      return;
    }
    case DType::BF16:
    case DType::F16: {
      std::vector<uint16_t> half(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        const float f = static_cast<float>(values[i]);
        half[i] = dst.dtype == DType::BF16 ? float_to_bf16(f) : float_to_f16(f);
      }
      ops.copy_from_host(dst, half.data());
      return;
    }
    case DType::I32:
    case DType::I64:
    case DType::E4M3:
    case DType::E5M2: break;
  }
  fail(std::string("copy: floating tensor expected, got ") + dtype_name(dst.dtype));
}

std::vector<double> copy_to_doubles(Ops& ops, const Tensor& src) {
  const size_t n = static_cast<size_t>(src.numel());
  std::vector<double> out(n);
  switch (src.dtype) {
    case DType::F64: ops.copy_to_host(out.data(), src); return out;
    case DType::F32: {
      std::vector<float> host(n);
      ops.copy_to_host(host.data(), src);
      out.assign(host.begin(), host.end());
      return out;
    }
    case DType::BF16:
    case DType::F16: {
      std::vector<uint16_t> host(n);
      ops.copy_to_host(host.data(), src);
      for (size_t i = 0; i < n; ++i)
        out[i] = src.dtype == DType::BF16 ? bf16_to_float(host[i]) : f16_to_float(host[i]);
      return out;
    }
    case DType::I32:
    case DType::I64:
    case DType::E4M3:
    case DType::E5M2: break;
  }
  fail(std::string("copy: floating tensor expected, got ") + dtype_name(src.dtype));
}

std::vector<double> doubles_from_bytes(const void* bytes, DType dtype, int64_t count) {
  std::vector<double> out(static_cast<size_t>(count));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype) {
      case DType::F64: out[i] = static_cast<const double*>(bytes)[i]; break;
      case DType::F32: out[i] = static_cast<const float*>(bytes)[i]; break;
      case DType::BF16: out[i] = bf16_to_float(static_cast<const uint16_t*>(bytes)[i]); break;
      case DType::F16: out[i] = f16_to_float(static_cast<const uint16_t*>(bytes)[i]); break;
      case DType::I32:
      case DType::I64:
      case DType::E4M3:
      case DType::E5M2:
        fail(std::string("copy: floating values expected, got ") + dtype_name(dtype));
    }
  }
  return out;
}

}  // namespace kiln
