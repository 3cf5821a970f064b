#include "kernels/fp8_meta.h"

#include <string>

#include "base/check.h"

namespace kiln {

bool is_fp8(DType dtype) { return dtype == DType::E4M3 || dtype == DType::E5M2; }

Fp8Format fp8_format(DType dtype, const char* op) {
  KILN_CHECK(is_fp8(dtype), std::string(op) + ": e4m3 or e5m2 codes expected, got " + dtype_name(dtype));
  return dtype == DType::E4M3 ? Fp8Format::E4M3 : Fp8Format::E5M2;
}

void check_fp8_meta(const Tensor& meta, const char* op) {
  KILN_CHECK(meta.dtype == DType::F32 && meta.numel() == kFp8MetaSize,
             std::string(op) + ": meta must be " + std::to_string(kFp8MetaSize) + " fp32 values, got " +
                 meta.shape.str() + " " + dtype_name(meta.dtype));
}

Fp8Format cast_format(const Tensor& codes, const Tensor& codes_t) {
  return fp8_format(codes.empty() ? codes_t.dtype : codes.dtype, "fp8_cast_transpose");
}

void check_fp8_cast(const Tensor& codes, const Tensor& codes_t, const Tensor& meta, const Tensor& x) {
  const char* op = "fp8_cast_transpose";
  check_fp8_meta(meta, op);
  KILN_CHECK(!codes.empty() || !codes_t.empty(), "fp8_cast_transpose: neither codes nor codes_t given");
  const int64_t R = x.shape.rows(), C = x.shape.cols();
  KILN_CHECK(codes.empty() || (codes.shape.rows() == R && codes.shape.cols() == C),
             "fp8_cast_transpose: codes " + codes.shape.str() + " for x " + x.shape.str());
  KILN_CHECK(codes_t.empty() || (codes_t.shape.rows() == C && codes_t.shape.cols() == R),
             "fp8_cast_transpose: codes_t " + codes_t.shape.str() + " is not x " + x.shape.str() + " transposed");
  KILN_CHECK(codes.empty() || codes_t.empty() || codes.dtype == codes_t.dtype,
             "fp8_cast_transpose: codes and codes_t differ in format");
  cast_format(codes, codes_t);
}

void check_fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b,
                      const Tensor& b_meta) {
  const char* op = "fp8_matmul";
  check_fp8_meta(a_meta, op);
  check_fp8_meta(b_meta, op);
  fp8_format(a.dtype, op);
  fp8_format(b.dtype, op);
  KILN_CHECK(!(a.dtype == DType::E5M2 && b.dtype == DType::E5M2), "fp8_matmul: no product of two e5m2 operands");
  KILN_CHECK(a.shape.cols() == b.shape.cols() && out.shape.rows() == a.shape.rows() &&
                 out.shape.cols() == b.shape.rows(),
             "fp8_matmul: " + a.shape.str() + " x " + b.shape.str() + "^T -> " + out.shape.str());
}

}  // namespace kiln
