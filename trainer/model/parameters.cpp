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
    if (value_shards_) owner_->release(value_shards_);
    if (expert_values_) owner_->release(expert_values_);
    if (expert_grads_) owner_->release(expert_grads_);
  }
}

void ParameterSet::shard_units(int shards, int rank, bool shard_values) {
  KILN_CHECK(params_.empty() && !sized_, "shard_units comes before the layout");
  KILN_CHECK(shards >= 1 && rank >= 0 && rank < shards, "shard_units: rank out of range");
  unit_rank_ = rank;
  KILN_CHECK(!freeze_base_, "a frozen base is not sharded in units");
  unit_shards_ = shards;
  shard_values_ = shard_values;
}

void ParameterSet::begin_pass() {
  params_.clear();
  if (!sized_) {
    size_ = dense_size_ = frozen_size_ = 0;
    units_.clear();
  }
  next_ = expert_next_ = frozen_next_ = 0;
  current_unit_ = -1;
}

namespace {
// n rounded up to a multiple of kAlignElements * parts.
int64_t aligned_elements(int64_t n, int parts = 1) {
  const int64_t multiple = kAlignElements * parts;
  return (n + multiple - 1) / multiple * multiple;
}
}  // namespace

int ParameterSet::begin_unit(UnitHold hold) {
  if (unit_shards_ == 0) return -1;
  // Each unit starts where a whole number of shards of the units before it ends.
  next_ = aligned_elements(next_, unit_shards_);
  ++current_unit_;
  if (sized_) {
    KILN_CHECK(static_cast<size_t>(current_unit_) < units_.size() &&
                   units_[static_cast<size_t>(current_unit_)].first == next_,
               "parameter units changed between layout passes");
    return current_unit_;
  }
  if (!units_.empty()) units_.back().last = next_;
  ParameterUnit unit;
  unit.first = next_;
  unit.hold = hold;
  units_.push_back(unit);
  return current_unit_;
}

void ParameterSet::place_units() {
  if (units_.empty()) return;
  units_.back().last = dense_size_;
  // The whole-step units each have a window; then the ends' one, as long as the longer of
  // them; then the blocks' two, each as long as the longest block.
  int64_t ends_window = 0, block_window = 0, at = 0, shard_at = 0;
  for (const ParameterUnit& u : units_) {
    if (u.hold == UnitHold::Ends) ends_window = std::max(ends_window, u.last - u.first);
    if (u.hold == UnitHold::Turn) block_window = std::max(block_window, u.last - u.first);
  }
  for (ParameterUnit& u : units_) {
    if (!u.whole_step()) continue;
    u.window = at;
    at += u.last - u.first;
  }
  const int64_t ends_at = at;
  at += ends_window;
  int64_t blocks = 0;
  for (ParameterUnit& u : units_) {
    u.shard_at = shard_at;
    shard_at += u.shard_size(unit_shards_);
    if (u.hold == UnitHold::Ends) u.window = ends_at;
    if (u.hold == UnitHold::Turn) u.window = at + (blocks++ % 2) * block_window;
  }
  window_size_ = at + std::min<int64_t>(blocks, 2) * block_window;
}

void* ParameterSet::place_in(void* buffer, DType dtype, int64_t offset, bool windowed) const {
  if (!buffer) return nullptr;
  if (windowed) {
    const ParameterUnit& u = units_[static_cast<size_t>(current_unit_)];
    offset = u.window + offset - u.first;
  }
  return static_cast<char*>(buffer) + offset * static_cast<int64_t>(dtype_size(dtype));
}

Tensor ParameterSet::flat_values() const {
  KILN_CHECK(!shard_values_, "the values are sharded in units: no flat buffer holds them whole");
  return {values_, value_dtype_, {size_}, device_};
}

Tensor ParameterSet::flat_grads() const {
  KILN_CHECK(unit_shards_ == 0, "the gradients are sharded in units: no flat buffer holds them whole");
  return {grads_, grad_dtype_, {size_}, device_};
}

Tensor ParameterSet::unit_values(size_t unit) const {
  const ParameterUnit& u = units_.at(unit);
  const int64_t at = shard_values_ ? u.window : u.first;
  return Tensor{values_, value_dtype_, {shard_values_ ? window_size_ : size_}, device_}.slice(at, at + u.last - u.first);
}

Tensor ParameterSet::unit_grads(size_t unit) const {
  const ParameterUnit& u = units_.at(unit);
  return Tensor{grads_, grad_dtype_, {window_size_}, device_}.slice(u.window, u.window + u.last - u.first);
}

Tensor ParameterSet::value_shards() const {
  KILN_CHECK(shard_values_, "the values are not sharded");
  return {value_shards_, value_dtype_, {dense_size_ / unit_shards_}, device_};
}

Tensor ParameterSet::value_shard(size_t unit) const {
  const ParameterUnit& u = units_.at(unit);
  return value_shards().slice(u.shard_at, u.shard_at + u.shard_size(unit_shards_));
}

void ParameterSet::keep_shard(Ops& ops, size_t unit, const Tensor& whole) const {
  const int64_t n = units_.at(unit).shard_size(unit_shards_);
  ops.cast(value_shard(unit), whole.slice(unit_rank_ * n, (unit_rank_ + 1) * n));
}

void ParameterSet::view_values_in(const Tensor& whole) {
  KILN_CHECK(shard_values_, "view_values_in needs sharded values");
  KILN_CHECK(!whole.data || whole.numel() == size_, "view_values_in: the whole values are laid out otherwise");
  for (Parameter& p : params_) {
    if (p.expert && !whole.data) {
      p.value.data = static_cast<char*>(expert_values_) +
                     (p.offset - dense_size_) * static_cast<int64_t>(dtype_size(value_dtype_));
      continue;
    }
    if (whole.data) {
      p.value.data = static_cast<char*>(whole.data) + p.offset * static_cast<int64_t>(dtype_size(value_dtype_));
      continue;
    }
    const auto unit = std::find_if(units_.begin(), units_.end(), [&](const ParameterUnit& u) { return p.offset < u.last; });
    KILN_CHECK(unit != units_.end(), p.name + " lies in no unit");
    p.value.data = static_cast<char*>(values_) + (unit->window + p.offset - unit->first) *
                                                     static_cast<int64_t>(dtype_size(value_dtype_));
  }
}

size_t ParameterSet::value_bytes() const {
  const int64_t n = shard_values_ ? dense_size_ / unit_shards_ + (size_ - dense_size_) : size_;
  return static_cast<size_t>(n) * dtype_size(value_dtype_);
}

size_t ParameterSet::grad_bytes() const {
  return static_cast<size_t>(unit_shards_ > 0 ? size_ - dense_size_ : size_) * dtype_size(grad_dtype_);
}

Tensor ParameterSet::expert_values() const {
  const Shape shape{size_ - dense_size_};
  if (shard_values_) return {expert_values_, value_dtype_, shape, device_};
  return Tensor{values_, value_dtype_, {size_}, device_}.slice(dense_size_, size_);
}

Tensor ParameterSet::expert_grads() const {
  const Shape shape{size_ - dense_size_};
  if (unit_shards_ > 0) return {expert_grads_, grad_dtype_, shape, device_};
  return Tensor{grads_, grad_dtype_, {size_}, device_}.slice(dense_size_, size_);
}

size_t ParameterSet::window_bytes() const {
  if (unit_shards_ == 0) return 0;
  return static_cast<size_t>(window_size_) * (dtype_size(grad_dtype_) + (shard_values_ ? dtype_size(value_dtype_) : 0));
}

Parameter ParameterSet::place(const std::string& name, Shape shape, int64_t offset, Init init,
                              double std, const TensorSplit& split, bool frozen, bool expert) {
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
  // Sharded in units, the experts' region lies apart from the windows, whole.
  const bool units = unit_shards_ > 0;
  void* value = frozen                    ? place_in(frozen_values_, value_dtype_, offset, false)
                : expert && shard_values_ ? place_in(expert_values_, value_dtype_, offset - dense_size_, false)
                                          : place_in(values_, value_dtype_, offset, shard_values_ && !expert);
  void* grad = frozen            ? nullptr
               : expert && units ? place_in(expert_grads_, grad_dtype_, offset - dense_size_, false)
                                 : place_in(grads_, grad_dtype_, offset, units && !expert);
  p.value = {value, value_dtype_, shape, device_};
  p.grad = {grad, grad_dtype_, shape, device_};
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
  KILN_CHECK(unit_shards_ == 0 || current_unit_ >= 0, name + " is laid out in no unit");
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
  Parameter p = place(name, shape, dense_size_ + at, init, std, split, false, true);
  p.expert = true;
  params_.push_back(p);
  return p;
}

void ParameterSet::allocate(Ops& ops, int shards, int expert_shards) {
  KILN_CHECK(owner_ == nullptr, "parameters allocated twice");
  size_regions(shards, expert_shards);
  owner_ = &ops;
  device_ = ops.device();
  // Sharded in units, the values' and the gradients' buffers are their windows.
  const size_t value_size = dtype_size(value_dtype_), grad_size = dtype_size(grad_dtype_);
  const auto experts = static_cast<size_t>(size_ - dense_size_);
  values_ = ops.allocate(shard_values_ ? static_cast<size_t>(window_size_) * value_size : value_bytes());
  if (shard_values_) {
    value_shards_ = ops.allocate(static_cast<size_t>(dense_size_ / unit_shards_) * value_size);
    if (experts > 0) expert_values_ = ops.allocate(experts * value_size);
  }
  grads_ = ops.allocate(unit_shards_ > 0 ? static_cast<size_t>(window_size_) * grad_size : grad_bytes());
  if (unit_shards_ > 0 && experts > 0) expert_grads_ = ops.allocate(experts * grad_size);
  if (frozen_size_ > 0) frozen_values_ = ops.allocate(frozen_bytes());
}

void ParameterSet::size_regions(int shards, int expert_shards) {
  // Each shard starts aligned too.
  dense_size_ = aligned_elements(next_, shards);
  size_ = dense_size_ + aligned_elements(expert_next_, expert_shards);
  frozen_size_ = aligned_elements(frozen_next_);
  sized_ = true;
  if (unit_shards_ > 0) {
    KILN_CHECK(shards == unit_shards_, "units sharded over " + std::to_string(unit_shards_) +
                                           " ranks, the buffers over " + std::to_string(shards));
    place_units();
  }
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
