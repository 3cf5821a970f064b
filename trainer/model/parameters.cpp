#include "trainer/model/parameters.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

namespace {
// Every tensor starts on a multiple of 32 elements: 64-byte alignment in F16/BF16 and
// better in wider types, in both buffers at once.
constexpr int64_t kAlignElements = 32;
}  // namespace

ParameterSet::~ParameterSet() {
  if (owner_) {
    owner_->release(values_);
    owner_->release(grads_);
    if (frozen_values_) owner_->release(frozen_values_);
  }
}

void ParameterSet::begin_pass() {
  params_.clear();
  if (!sized_) size_ = dense_size_ = frozen_size_ = 0;
  next_ = expert_next_ = frozen_next_ = 0;
}

namespace {
// n rounded up to a multiple of kAlignElements * parts.
int64_t aligned_elements(int64_t n, int parts = 1) {
  const int64_t multiple = kAlignElements * parts;
  return (n + multiple - 1) / multiple * multiple;
}
}  // namespace

Parameter ParameterSet::place(const std::string& name, Shape shape, int64_t offset, Init init,
                              double std, const TensorSplit& split, bool frozen) {
  Parameter p;
  p.name = name;
  p.offset = offset;
  p.frozen = frozen;
  if (!sized_) {
    // The first pass sizes the buffers: the experts' region follows what is laid out so far.
    dense_size_ = next_;
    size_ = next_ + expert_next_;
    frozen_size_ = frozen_next_;
  }
  KILN_CHECK(!sized_ || offset + shape.numel() <= (frozen ? frozen_size_ : size_),
             "parameter layout grew after it was sized");
  void* values = frozen ? frozen_values_ : values_;
  p.value = {values ? static_cast<char*>(values) + p.offset * dtype_size(value_dtype_) : nullptr,
             value_dtype_, shape, device_};
  p.grad = {grads_ && !frozen ? static_cast<char*>(grads_) + p.offset * dtype_size(grad_dtype_) : nullptr,
            grad_dtype_, shape, device_};
  p.init = init;
  p.std = std;
  p.decay = shape.rank >= 2;
  p.split = split;
  p.real_rows = p.whole_shape()[0];
  return p;
}

Parameter ParameterSet::add(const std::string& name, Shape shape, Init init, double std,
                            int64_t real_rows, const TensorSplit& split, bool copy) {
  return freeze_base_ ? add_frozen(name, shape, init, std, real_rows, split, copy)
                      : add_trainable(name, shape, init, std, real_rows, split, copy);
}

Parameter ParameterSet::add_adapter(const std::string& name, Shape shape, Init init, double std,
                                    const TensorSplit& split) {
  Parameter p = add_trainable(name, shape, init, std, -1, split, false);
  p.adapter = params_.back().adapter = true;
  return p;
}

Parameter ParameterSet::add_trainable(const std::string& name, Shape shape, Init init, double std,
                                      int64_t real_rows, const TensorSplit& split, bool copy) {
  const int64_t offset = aligned_elements(next_);
  next_ = offset + shape.numel();
  Parameter p = place(name, shape, offset, init, std, split, false);
  KILN_CHECK(!sized_ || next_ <= dense_size_, "parameter layout grew after it was sized");
  p.copy = copy;
  if (real_rows >= 0) p.real_rows = real_rows;
  params_.push_back(p);
  return p;
}

Parameter ParameterSet::add_frozen(const std::string& name, Shape shape, Init init, double std,
                                   int64_t real_rows, const TensorSplit& split, bool copy) {
  const int64_t offset = aligned_elements(frozen_next_);
  frozen_next_ = offset + shape.numel();
  Parameter p = place(name, shape, offset, init, std, split, true);
  p.copy = copy;
  if (real_rows >= 0) p.real_rows = real_rows;
  params_.push_back(p);
  return p;
}

Parameter ParameterSet::add_expert(const std::string& name, Shape shape, Init init, double std,
                                   const TensorSplit& split) {
  KILN_CHECK(!freeze_base_, "a frozen base has no experts' region");
  const int64_t at = aligned_elements(expert_next_);
  expert_next_ = at + shape.numel();
  Parameter p = place(name, shape, dense_size_ + at, init, std, split, false);
  p.expert = true;
  params_.push_back(p);
  return p;
}

void ParameterSet::allocate(Ops& ops, int shards, int expert_shards) {
  KILN_CHECK(owner_ == nullptr, "parameters allocated twice");
  size_regions(shards, expert_shards);
  owner_ = &ops;
  device_ = ops.device();
  values_ = ops.allocate(value_bytes());
  grads_ = ops.allocate(grad_bytes());
  if (frozen_size_ > 0) frozen_values_ = ops.allocate(frozen_bytes());
}

void ParameterSet::size_regions(int shards, int expert_shards) {
  // Each shard starts aligned too.
  dense_size_ = aligned_elements(next_, shards);
  size_ = dense_size_ + aligned_elements(expert_next_, expert_shards);
  frozen_size_ = aligned_elements(frozen_next_);
  sized_ = true;
}

const Parameter& ParameterSet::find(const std::string& name) const {
  for (const Parameter& p : params_)
    if (p.name == name) return p;
  fail("no parameter named " + name);
}

int64_t ParameterSet::count() const {
  int64_t n = 0;
  for (const Parameter& p : params_)
    if (!p.copy && !p.frozen) n += p.value.numel() / p.value.shape[0] * p.local_real_rows();
  return n;
}

int64_t ParameterSet::whole_count(bool with_frozen) const {
  int64_t n = 0;
  for (const Parameter& p : params_) {
    if (p.copy || (p.frozen && !with_frozen)) continue;
    const Shape whole = p.whole_shape();
    n += whole.numel() / whole[0] * p.real_rows;
  }
  return n;
}

Tensor Parameter::view_in(const Tensor& flat) const {
  KILN_CHECK(!frozen, name + " is frozen: it has no place in the flat buffers");
  Tensor t = flat;
  t.data = static_cast<char*>(flat.data) + offset * static_cast<int64_t>(dtype_size(flat.dtype));
  t.shape = value.shape;
  return t;
}

Shape Parameter::whole_shape() const {
  Shape whole = value.shape;
  if (split.tensor_sharded()) {
    int64_t extent = 0;
    for (int64_t part : split.parts) extent += part;
    whole.dims[split.dim] = extent;
  }
  whole.dims[0] *= split.blocks;
  return whole;
}

int64_t Parameter::local_real_rows() const {
  if (split.blocks > 1) return value.shape[0];  // experts: no padding rows
  if (!split.tensor_sharded() || split.dim != 0) return real_rows;
  // A row split of one part (the vocabulary): rank r holds rows [r * rows, (r + 1) * rows).
  const int64_t rows = value.shape[0];
  return std::clamp<int64_t>(real_rows - split.rank * rows, 0, rows);
}

namespace {
// Calls visit(run) for each run of the piece of tensor rank `rank` in block `block`.
template <typename Visit>
void for_each_run(const Parameter& p, int block, int rank, Visit visit) {
  const Shape whole = p.whole_shape();
  const int64_t rows = whole[0] / p.split.blocks, cols = whole.numel() / whole[0];
  const int64_t base = block * rows * cols;
  if (!p.split.tensor_sharded()) {
    visit(PieceRun{base, 0, rows, cols, cols, cols});
    return;
  }
  const int tp = p.split.tp;
  int64_t whole_at = 0, piece_at = 0;  // along dim
  const int64_t piece_cols = p.split.dim == 0 ? cols : cols / tp;
  for (int64_t part : p.split.parts) {
    const int64_t share = part / tp, from = whole_at + rank * share;
    if (p.split.dim == 0)
      visit(PieceRun{base + from * cols, piece_at * cols, share, cols, cols, piece_cols});
    else
      visit(PieceRun{base + from, piece_at, rows, share, cols, piece_cols});
    whole_at += part;
    piece_at += share;
  }
}

// Copies a run's elements from the whole to the piece (or back, when `to_whole`).
void copy_run(const PieceRun& run, const double* from, double* to, bool to_whole) {
  for (int64_t r = 0; r < run.rows; ++r) {
    const int64_t w = run.whole + r * run.whole_stride, l = run.piece + r * run.piece_stride;
    if (to_whole)
      std::copy_n(from + l, run.cols, to + w);
    else
      std::copy_n(from + w, run.cols, to + l);
  }
}
}  // namespace

std::vector<PieceRun> Parameter::runs() const {
  std::vector<PieceRun> runs;
  for_each_run(*this, split.block, split.rank, [&](const PieceRun& run) { runs.push_back(run); });
  return runs;
}

std::vector<double> Parameter::piece_of(const std::vector<double>& whole) const {
  if (!split.sharded()) return whole;
  std::vector<double> piece(static_cast<size_t>(value.numel()));
  for (const PieceRun& run : runs()) copy_run(run, whole.data(), piece.data(), false);
  return piece;
}

std::vector<double> Parameter::whole_from(const std::vector<double>& pieces) const {
  // Every rank holds the whole of an unsplit parameter: the first one's is it.
  if (!split.sharded()) return {pieces.begin(), pieces.begin() + value.numel()};
  std::vector<double> whole(static_cast<size_t>(whole_shape().numel()));
  const int64_t n_piece = value.numel();
  const int ranks = split.tensor_sharded() ? split.tp : 1;
  for (int b = 0; b < split.blocks; ++b)
    for (int r = 0; r < ranks; ++r)
      for_each_run(*this, b, r, [&](const PieceRun& run) {
        copy_run(run, pieces.data() + (b * ranks + r) * n_piece, whole.data(), true);
      });
  return whole;
}

}  // namespace kiln
