// Per-tensor scaling for FP8 training, as Transformer Engine's recipes do it, on the host:
// the CPU reference that the cuBLASLt FP8 path (precision.dtype=fp8, Hopper) is held to.
//
// FP8 holds few values (E4M3 up to 448, E5M2 up to 57344, 3 and 2 mantissa bits), so each
// tensor is multiplied by its own scale before the cast, chosen to bring its largest
// magnitude (its amax) near the format's largest value, and the product of two such tensors
// is multiplied by both inverse scales. Forward tensors (weights, activations) are E4M3,
// gradients E5M2.
//  - delayed scaling: the scale a step uses comes from the amaxes of earlier steps (the
//    largest over a history of `history` steps, or the most recent), so the cast needs no
//    pass over the tensor first; each cast records its amax for the steps after.
//  - current scaling: the scale comes from the tensor's own amax, taken just before the cast.
// scale = fp8_max / amax / 2^margin. A zero or non-finite amax leaves the scale as it was, and
// a non-finite one never enters the history (its step is skipped with its non-finite
// gradients); values beyond the format's range after scaling saturate, and are counted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/fp8_convert.h"

namespace kiln {

struct Fp8Recipe {
  std::string scaling = "delayed";  // delayed | current
  int history = 1024;               // steps of amax kept (delayed)
  std::string amax_compute = "max";  // max | most_recent: how the history gives the amax
  int margin = 0;                    // scale down by 2^margin for headroom
};

// One tensor's values cast to FP8: the codes and the inverse scale that recovers them.
struct Fp8Tensor {
  std::vector<uint8_t> codes;
  Fp8Format format = Fp8Format::E4M3;
  float scale_inv = 1;
  int64_t saturated = 0;  // values whose magnitude after scaling exceeded the format's largest
};

// The scale of one tensor from step to step.
class Fp8Scale {
 public:
  // Refuses a recipe it cannot follow, in one line.
  Fp8Scale(Fp8Format format, const Fp8Recipe& recipe);

  float scale() const { return scale_; }
  Fp8Format format() const { return format_; }

  // Casts n values at this tensor's scale (under current scaling, first set from their amax);
  // records their amax for update().
  Fp8Tensor quantize(const float* x, int64_t n);

  // Records the amax of a cast made elsewhere (the device's, at this scale) for update().
  void record(float amax);

  // Delayed scaling, after each step: the amaxes recorded since the last update enter the
  // history (their largest), and the scale for the next step comes from it.
  void update();

  // Amaxes left out of the history for being Inf or NaN.
  int64_t non_finite_amaxes() const { return non_finite_; }

 private:
  void scale_for(float amax);

  Fp8Format format_;
  Fp8Recipe recipe_;
  float scale_ = 1;
  float pending_amax_ = 0;  // since the last update
  bool pending_ = false;
  std::vector<float> history_;  // a ring of the last recipe_.history steps' amaxes
  size_t next_ = 0;
  int64_t non_finite_ = 0;
};

// The largest magnitude among n values (NaN when one is NaN).
float amax_of(const float* x, int64_t n);

// The values an Fp8Tensor stands for: each code's value times the inverse scale.
std::vector<float> dequantize(const Fp8Tensor& t);

// The reference of cuBLASLt's FP8 product in kiln's forward layout: out[m, n] = the sum over
// k of a[m, k] b[n, k], each operand's codes times its inverse scale, accumulated in double
// (cuBLASLt accumulates in fp32). a is [m, k] and b [n, k], row-major.
std::vector<float> fp8_matmul_nt(const Fp8Tensor& a, const Fp8Tensor& b, int64_t m, int64_t n, int64_t k);

}  // namespace kiln
