// The linear layers' products in FP8 (precision.dtype=fp8), as Transformer Engine computes
// them on Hopper: each product's operands cast to FP8 with a per-tensor scale, multiplied with
// fp32 accumulation, the result in the compute dtype (bf16 on a GPU, fp32 on the CPU, whose
// FP8 ops are an emulation of the same quantisation). Weights and master weights stay as they
// are (bf16 copies of fp32 masters on a GPU); only the products' inputs are cast.
//
// Per layer, three scaled tensors: the input x and the weight W in E4M3, the output gradient
// dy in E5M2. Forward: y = x W^T from x's codes [N, in] and W's [out, in]. Backward: the weight
// gradient dW += dy^T x from dy's and x's codes cast transposed ([out, N], [in, N]), the input
// gradient dx = dy W from dy's codes and W's transposed ([in, out]): every product in the
// K-contiguous layout cuBLASLt's FP8 kernels need. Backward casts x and W again (same scale)
// rather than keeping their codes from forward: no memory per layer beyond the scales.
//
// Scales follow the recipe (fp8_scaling.h): under delayed scaling the device's casts record
// each tensor's amax, and after each step update() brings them to the host (one copy), moves
// each tensor's history on and writes the next step's scales back (one copy); under current
// scaling each cast first takes its tensor's own amax on the device, and update() does nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "trainer/memory/arena.h"
#include "trainer/precision/fp8_scaling.h"

namespace kiln {

class Fp8Products {
 public:
  explicit Fp8Products(const Fp8Recipe& recipe) : recipe_(recipe) {}

  // A layout pass (the model's two: sizing, then handing out memory): layers register in
  // bind order between begin_pass() and end_pass().
  void begin_pass();
  // A linear layer of `in` inputs and `out` outputs over at most `rows` rows; returns its
  // index for forward() and backward().
  int add(int64_t rows, int64_t in, int64_t out);
  void end_pass();
  // After the sizing pass: allocates the scales and the codes' scratch (then the second pass
  // hands them out); after the second, start() sets every scale to 1.
  void allocate(Ops& ops) { arena_.allocate(ops); }
  void start(Ops& ops);
  size_t bytes() const { return arena_.bytes(); }

  // y[N, out] = x[N, in] W[out, in]^T in FP8, overwriting y.
  void forward(Ops& ops, int layer, const Tensor& y, const Tensor& x, const Tensor& weight) const;
  // dweight += dy^T x and, unless dx is empty, dx = dy W (overwriting dx), in FP8.
  void backward(Ops& ops, int layer, const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& weight,
                const Tensor& dweight) const;

  // After each step: delayed scaling's history and next scales (see above).
  void update(Ops& ops);

 private:
  // x, W (E4M3) and dy (E5M2) of each layer, in this order in metas_.
  static constexpr int kTensors = 3;
  static DType format_of(int tensor) { return tensor == 2 ? DType::E5M2 : DType::E4M3; }
  Tensor meta(int layer, int tensor) const;
  Tensor codes(int buffer, DType format, int64_t rows, int64_t cols) const;

  Fp8Recipe recipe_;
  Arena arena_{"fp8"};
  int layers_ = 0;
  int64_t widest_ = 0;       // the most elements any operand of any layer has
  Tensor metas_;             // F32 [layers, kTensors, kFp8MetaSize]
  Tensor buffers_[3];        // codes scratch, widest_ bytes each
  std::vector<Fp8Scale> scales_;  // delayed scaling's host side, one per meta
};

}  // namespace kiln
