#include "trainer/precision/fp8_products.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/fp8_meta.h"

namespace kiln {

void Fp8Products::begin_pass() {
  arena_.rewind();
  layers_ = 0;
  widest_ = 0;
}

int Fp8Products::add(int64_t rows, int64_t in, int64_t out) {
  widest_ = std::max({widest_, rows * in, rows * out, in * out});
  return layers_++;
}

void Fp8Products::end_pass() {
  metas_ = arena_.take({std::max(layers_, 1), kTensors, kFp8MetaSize}, DType::F32);
  for (Tensor& b : buffers_) b = arena_.take({std::max<int64_t>(widest_, 1)}, DType::E4M3);
}

void Fp8Products::start(Ops& ops) {
  scales_.clear();
  std::vector<float> host(static_cast<size_t>(metas_.numel()));
  for (int i = 0; i < layers_ * kTensors; ++i) {
    scales_.emplace_back(fp8_format(format_of(i % kTensors), "fp8"), recipe_);
    float* m = &host[static_cast<size_t>(i * kFp8MetaSize)];
    m[kFp8Scale] = m[kFp8ScaleInv] = 1.0f;  // the recipe's scale before any amax
  }
  ops.copy_from_host(metas_, host.data());
}

Tensor Fp8Products::meta(int layer, int tensor) const {
  return metas_.view({int64_t{metas_.shape[0]} * kTensors, kFp8MetaSize})
      .slice(int64_t{layer} * kTensors + tensor, int64_t{layer} * kTensors + tensor + 1)
      .view({kFp8MetaSize});
}

Tensor Fp8Products::codes(int buffer, DType format, int64_t rows, int64_t cols) const {
  KILN_CHECK(rows * cols <= widest_, "fp8: an operand of " + std::to_string(rows * cols) +
                                          " elements is wider than the layers laid out");
  Tensor t = buffers_[buffer];
  t.dtype = format;
  t.shape = {rows, cols};
  return t;
}

void Fp8Products::forward(Ops& ops, int layer, const Tensor& y, const Tensor& x, const Tensor& weight) const {
  const Tensor mx = meta(layer, 0), mw = meta(layer, 1);
  const int64_t N = x.shape.rows(), in = x.shape.cols(), out = weight.shape.rows();
  if (recipe_.scaling == "current") {
    ops.fp8_current_scale(mx, x, DType::E4M3, recipe_.margin);
    ops.fp8_current_scale(mw, weight, DType::E4M3, recipe_.margin);
  }
  const Tensor xq = codes(0, DType::E4M3, N, in), wq = codes(1, DType::E4M3, out, in);
  ops.fp8_cast_transpose(xq, {}, mx, x);
  ops.fp8_cast_transpose(wq, {}, mw, weight);
  ops.fp8_matmul(y, xq, mx, wq, mw, false);
}

void Fp8Products::backward(Ops& ops, int layer, const Tensor& dx, const Tensor& dy, const Tensor& x,
                           const Tensor& weight, const Tensor& dweight) const {
  const Tensor mx = meta(layer, 0), mw = meta(layer, 1), mdy = meta(layer, 2);
  const int64_t N = dy.shape.rows(), in = x.shape.cols(), out = dy.shape.cols();
  if (recipe_.scaling == "current") ops.fp8_current_scale(mdy, dy, DType::E5M2, recipe_.margin);
  const Tensor dyq = codes(0, DType::E5M2, N, out), dyq_t = codes(1, DType::E5M2, out, N);
  ops.fp8_cast_transpose(dx.empty() ? Tensor{} : dyq, dyq_t, mdy, dy);
  const Tensor xq_t = codes(2, DType::E4M3, in, N);
  ops.fp8_cast_transpose({}, xq_t, mx, x);
  ops.fp8_matmul(dweight, dyq_t, mdy, xq_t, mx, true);
  if (dx.empty()) return;
  const Tensor wq_t = codes(2, DType::E4M3, in, out);
  ops.fp8_cast_transpose({}, wq_t, mw, weight);
  ops.fp8_matmul(dx, dyq, mdy, wq_t, mw, false);
}

void Fp8Products::update(Ops& ops) {
  if (recipe_.scaling != "delayed" || layers_ == 0) return;
  std::vector<float> host(static_cast<size_t>(metas_.numel()));
  ops.copy_to_host(host.data(), metas_);
  for (size_t i = 0; i < scales_.size(); ++i) {
    float* m = &host[i * kFp8MetaSize];
    Fp8Scale& s = scales_[i];
    s.record(m[kFp8Amax]);
    s.update();
    m[kFp8Scale] = s.scale();
    m[kFp8ScaleInv] = 1.0f / s.scale();
    m[kFp8Amax] = 0;
  }
  ops.copy_from_host(metas_, host.data());
}

}  // namespace kiln
