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
  if (!owner_) return;
  for (void* memory : {values_, grads_, frozen_values_, parts_[0].value_shards, parts_[1].window_values,
                       parts_[1].window_grads, parts_[1].value_shards})
    if (memory) owner_->release(memory);
}

void ParameterSet::shard_units(int shards, int rank, bool shard_values, int expert_shards, int expert_rank) {
  KILN_CHECK(params_.empty() && !sized_, "shard_units comes before the layout");
  KILN_CHECK(shards >= 1 && rank >= 0 && rank < shards && expert_shards >= 1 && expert_rank >= 0 &&
                 expert_rank < expert_shards,
             "shard_units: rank out of range");
  KILN_CHECK(!freeze_base_, "a frozen base is not sharded in units");
  parts_[unit_part_index(UnitPart::Dense)].shards = shards;
  parts_[unit_part_index(UnitPart::Dense)].rank = rank;
  parts_[unit_part_index(UnitPart::Experts)].shards = expert_shards;
  parts_[unit_part_index(UnitPart::Experts)].rank = expert_rank;
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
  if (!in_units()) return -1;
  // Each unit starts where a whole number of shards of the units before it ends, in the
  // dense region and in the experts'.
  next_ = aligned_elements(next_, parts_[unit_part_index(UnitPart::Dense)].shards);
  expert_next_ = aligned_elements(expert_next_, parts_[unit_part_index(UnitPart::Experts)].shards);
  ++current_unit_;
  if (sized_) {
    const bool same = static_cast<size_t>(current_unit_) < units_.size() &&
                      units_[static_cast<size_t>(current_unit_)].dense.first == next_ &&
                      units_[static_cast<size_t>(current_unit_)].experts.first == dense_size_ + expert_next_;
    KILN_CHECK(same, "parameter units changed between layout passes");
    return current_unit_;
  }
  // Until the dense region's length is known, the experts' part is counted from its region's
  // start (place_units moves it).
  if (!units_.empty()) {
    units_.back().dense.last = next_;
    units_.back().experts.last = expert_next_;
  }
  ParameterUnit unit;
  unit.dense.first = next_;
  unit.experts.first = expert_next_;
  unit.hold = hold;
  units_.push_back(unit);
  return current_unit_;
}

void ParameterSet::place_units() {
  if (units_.empty()) return;
  units_.back().dense.last = dense_size_;
  units_.back().experts.last = size_ - dense_size_;
  for (ParameterUnit& u : units_) {
    u.experts.first += dense_size_;
    u.experts.last += dense_size_;
  }
  // In each part: the whole-step units each have a window; then the ends' one, as long as
  // the longer of them; then the blocks' two, each as long as the longest block.
  for (const UnitPart part : kUnitParts) {
    PartMemory& memory = parts_[unit_part_index(part)];
    int64_t ends_window = 0, block_window = 0, at = 0, shard_at = 0;
    for (const ParameterUnit& u : units_) {
      if (u.hold == UnitHold::Ends) ends_window = std::max(ends_window, u.part(part).size());
      if (u.hold == UnitHold::Turn) block_window = std::max(block_window, u.part(part).size());
    }
    for (ParameterUnit& u : units_) {
      if (!u.whole_step()) continue;
      u.part(part).window = at;
      at += u.part(part).size();
    }
    const int64_t ends_at = at;
    at += ends_window;
    int64_t blocks = 0;
    for (ParameterUnit& u : units_) {
      UnitSpan& span = u.part(part);
      span.shard_at = shard_at;
      shard_at += span.size() / memory.shards;
      if (u.hold == UnitHold::Ends) span.window = ends_at;
      if (u.hold == UnitHold::Turn) span.window = at + (blocks++ % 2) * block_window;
    }
    memory.window_size = at + std::min<int64_t>(blocks, 2) * block_window;
    memory.region_size = part == UnitPart::Dense ? dense_size_ : size_ - dense_size_;
  }
}

void* ParameterSet::place_in(void* buffer, DType dtype, int64_t offset) const {
  if (!buffer) return nullptr;
  return static_cast<char*>(buffer) + offset * static_cast<int64_t>(dtype_size(dtype));
}

void* ParameterSet::place_in_window(void* windows, DType dtype, int64_t offset, size_t unit, UnitPart part) const {
  if (!windows) return nullptr;
  const UnitSpan& span = units_.at(unit).part(part);
  return place_in(windows, dtype, span.window + offset - span.first);
}

Tensor ParameterSet::flat_values() const {
  KILN_CHECK(!shard_values_, "the values are sharded in units: no flat buffer holds them whole");
  return {values_, value_dtype_, {size_}, device_};
}

Tensor ParameterSet::flat_grads() const {
  KILN_CHECK(!in_units(), "the gradients are sharded in units: no flat buffer holds them whole");
  return {grads_, grad_dtype_, {size_}, device_};
}

Tensor ParameterSet::unit_values(size_t unit, UnitPart part) const {
  const UnitSpan& span = units_.at(unit).part(part);
  if (!shard_values_) return flat_values().slice(span.first, span.last);
  const PartMemory& memory = parts_[unit_part_index(part)];
  return Tensor{memory.window_values, value_dtype_, {memory.window_size}, device_}.slice(span.window,
                                                                                        span.window + span.size());
}

Tensor ParameterSet::unit_grads(size_t unit, UnitPart part) const {
  const UnitSpan& span = units_.at(unit).part(part);
  const PartMemory& memory = parts_[unit_part_index(part)];
  return Tensor{memory.window_grads, grad_dtype_, {memory.window_size}, device_}.slice(span.window,
                                                                                      span.window + span.size());
}

Tensor ParameterSet::value_shard(size_t unit, UnitPart part) const {
  KILN_CHECK(shard_values_, "the values are not sharded");
  const UnitSpan& span = units_.at(unit).part(part);
  const PartMemory& memory = parts_[unit_part_index(part)];
  const Tensor shards{memory.value_shards, value_dtype_, {memory.region_size / memory.shards}, device_};
  return shards.slice(span.shard_at, span.shard_at + span.size() / memory.shards);
}

void ParameterSet::keep_shard(Ops& ops, size_t unit, UnitPart part, const Tensor& whole) const {
  if (!units_.at(unit).has(part)) return;
  const int64_t n = units_[unit].part(part).size() / parts_[unit_part_index(part)].shards, rank = parts_[unit_part_index(part)].rank;
  ops.cast(value_shard(unit, part), whole.slice(rank * n, (rank + 1) * n));
}

void ParameterSet::view_values_in(const Tensor& whole) {
  KILN_CHECK(shard_values_, "view_values_in needs sharded values");
  KILN_CHECK(!whole.data || whole.numel() == size_, "view_values_in: the whole values are laid out otherwise");
  for (Parameter& p : params_) {
    const UnitPart part = p.expert ? UnitPart::Experts : UnitPart::Dense;
    p.value.data = whole.data ? place_in(whole.data, value_dtype_, p.offset)
                              : place_in_window(parts_[unit_part_index(part)].window_values, value_dtype_, p.offset,
                                                static_cast<size_t>(p.unit), part);
  }
}

size_t ParameterSet::value_bytes() const {
  const PartMemory &dense = parts_[unit_part_index(UnitPart::Dense)], &experts = parts_[unit_part_index(UnitPart::Experts)];
  const int64_t n = shard_values_ ? dense.region_size / dense.shards + experts.region_size / experts.shards : size_;
  return static_cast<size_t>(n) * dtype_size(value_dtype_);
}

size_t ParameterSet::grad_bytes() const {
  return in_units() ? 0 : static_cast<size_t>(size_) * dtype_size(grad_dtype_);
}

size_t ParameterSet::window_bytes() const {
  const int64_t windows = parts_[unit_part_index(UnitPart::Dense)].window_size + parts_[unit_part_index(UnitPart::Experts)].window_size;
  return static_cast<size_t>(windows) * (dtype_size(grad_dtype_) + (shard_values_ ? dtype_size(value_dtype_) : 0));
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
  // Sharded in units, the values (when sharded) and the gradients are whole only in their
  // unit's window of their part.
  const bool units = in_units();
  const UnitPart part = expert ? UnitPart::Experts : UnitPart::Dense;
  const PartMemory& memory = parts_[unit_part_index(part)];
  const size_t unit = static_cast<size_t>(current_unit_);
  void* value = frozen                  ? place_in(frozen_values_, value_dtype_, offset)
                : units && shard_values_ ? place_in_window(memory.window_values, value_dtype_, offset, unit, part)
                                         : place_in(values_, value_dtype_, offset);
  void* grad = frozen  ? nullptr
               : units ? place_in_window(memory.window_grads, grad_dtype_, offset, unit, part)
                       : place_in(grads_, grad_dtype_, offset);
  p.unit = units ? current_unit_ : -1;
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
  KILN_CHECK(!in_units() || current_unit_ >= 0, name + " is laid out in no unit");
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
  KILN_CHECK(!in_units() || current_unit_ >= 0, name + " is laid out in no unit");
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
  if (frozen_size_ > 0) frozen_values_ = ops.allocate(frozen_bytes());
  if (!in_units()) {
    values_ = ops.allocate(value_bytes());
    grads_ = ops.allocate(grad_bytes());
    return;
  }
  // Sharded in units, each part's gradients are its windows, and so are its values when
  // sharded (beside the rank's shards); unsharded values stay whole in the flat values.
  const size_t value_size = dtype_size(value_dtype_), grad_size = dtype_size(grad_dtype_);
  const auto elements = [](int64_t n) { return static_cast<size_t>(n); };
  if (!shard_values_) values_ = ops.allocate(elements(size_) * value_size);
  for (const UnitPart part : kUnitParts) {
    PartMemory& memory = parts_[unit_part_index(part)];
    if (memory.region_size == 0) continue;
    memory.window_grads = ops.allocate(elements(memory.window_size) * grad_size);
    if (!shard_values_) continue;
    memory.window_values = ops.allocate(elements(memory.window_size) * value_size);
    memory.value_shards = ops.allocate(elements(memory.region_size / memory.shards) * value_size);
  }
  // The dense part's windows are the buffers the flat ones would be.
  grads_ = parts_[unit_part_index(UnitPart::Dense)].window_grads;
  if (shard_values_) values_ = parts_[unit_part_index(UnitPart::Dense)].window_values;
}

void ParameterSet::size_regions(int shards, int expert_shards) {
  // Each shard starts aligned too.
  dense_size_ = aligned_elements(next_, shards);
  size_ = dense_size_ + aligned_elements(expert_next_, expert_shards);
  frozen_size_ = aligned_elements(frozen_next_);
  sized_ = true;
  if (in_units()) {
    KILN_CHECK(shards == unit_shards(UnitPart::Dense) && expert_shards == unit_shards(UnitPart::Experts),
               "units sharded over " + std::to_string(unit_shards(UnitPart::Dense)) + " ranks (experts " +
                   std::to_string(unit_shards(UnitPart::Experts)) + "), the buffers over " + std::to_string(shards) +
                   " (" + std::to_string(expert_shards) + ")");
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
