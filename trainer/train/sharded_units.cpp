#include "trainer/train/sharded_units.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/check.h"
#include "trainer/util/step_clock.h"

namespace kiln {

ShardedUnits::ShardedUnits(GptModel& model, AdamW& optimizer, Communicator& group, Communicator* replicas,
                           Communicator* experts, bool prefetch)
    : model_(model),
      optimizer_(optimizer),
      group_(group),
      replicas_(replicas && replicas->size() > 1 ? replicas : nullptr),
      experts_(experts),
      ops_(model.ops()),
      params_(model.parameters()),
      prefetch_(prefetch) {
  KILN_CHECK(!params_.units().empty(), "sharded units need a parameter set laid out in units");
  for (const UnitPart part : kUnitParts) {
    const bool used = std::any_of(params_.units().begin(), params_.units().end(),
                                  [&](const ParameterUnit& u) { return u.has(part); });
    if (!used) continue;
    KILN_CHECK(part == UnitPart::Dense || experts_, "sharded units: the experts' parts need their group");
    KILN_CHECK(group_of(part).size() == params_.unit_shards(part),
               "the units are sharded over " + std::to_string(params_.unit_shards(part)) + " ranks, the group has " +
                   std::to_string(group_of(part).size()));
  }
  for (const ParameterUnit& u : params_.units()) {
    const bool known =
        std::any_of(windows_.begin(), windows_.end(), [&](const Window& w) { return w.at == u.dense.window; });
    if (known) continue;
    windows_.emplace_back();
    windows_.back().at = u.dense.window;
  }
  model_.set_unit_hooks(this);
}

ShardedUnits::~ShardedUnits() { model_.set_unit_hooks(nullptr); }

Communicator& ShardedUnits::group_of(UnitPart part) const { return part == UnitPart::Dense ? group_ : *experts_; }

size_t ShardedUnits::window_of(int unit) const {
  const int64_t at = params_.units().at(static_cast<size_t>(unit)).dense.window;
  for (size_t w = 0; w < windows_.size(); ++w)
    if (windows_[w].at == at) return w;
  fail("sharded units: unit " + std::to_string(unit) + " has no window");
}

void ShardedUnits::begin_step() {
  optimizer_.zero_gradient_shards();
  gather_whole_step();
  // What the step waits for from here on is within its forwards and backwards.
  waited_ms_ = 0;
}

void ShardedUnits::gather_whole_step() {
  // The shards changed since the windows were filled (an update, a restore): every unit is
  // gathered again before it is used.
  for (Window& w : windows_) {
    for (Transfers& t : w.parts) {
      if (t.gather) t.gather->wait();
      t.gather.reset();
    }
    w.values_of = -1;
  }
  if (!params_.values_sharded()) return;
  const std::vector<ParameterUnit>& units = params_.units();
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].whole_step()) start_gather(static_cast<int>(u));
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].whole_step()) wait_gathered(static_cast<int>(u));
}

void ShardedUnits::end_step() {
  for (size_t w = 0; w < windows_.size(); ++w) finish_reduction(w);
  const std::vector<ParameterUnit>& units = params_.units();
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].whole_step()) start_reduction(static_cast<int>(u));
  for (size_t w = 0; w < windows_.size(); ++w) finish_reduction(w);
}

double ShardedUnits::take_waited_ms() { return std::exchange(waited_ms_, 0.0); }

void ShardedUnits::before_reading(int unit, int next) {
  if (!params_.values_sharded()) return;
  wait_gathered(unit);
  if (prefetch_ && next >= 0) start_gather(next);
}

void ShardedUnits::before_gradients(int unit) {
  // A unit's gradients start from zero each micro-batch, once the window's last ones are in
  // the shards; a unit kept whole for the step adds them up in place.
  const size_t u = static_cast<size_t>(unit);
  if (params_.units().at(u).whole_step()) return;
  finish_reduction(window_of(unit));
  for (const UnitPart part : kUnitParts)
    if (params_.units()[u].has(part)) ops_.fill(params_.unit_grads(u, part), 0.0);
}

void ShardedUnits::after_gradients(int unit) {
  if (!params_.units().at(static_cast<size_t>(unit)).whole_step()) start_reduction(unit);
}

void ShardedUnits::start_gather(int unit) {
  Window& w = windows_[window_of(unit)];
  if (w.values_of == unit) return;
  const size_t u = static_cast<size_t>(unit);
  for (const UnitPart part : kUnitParts) {
    if (!params_.units()[u].has(part)) continue;
    Transfers& t = w.parts[unit_part_index(part)];
    KILN_CHECK(!t.gather, "sharded units: a window is gathered into twice at once");
    t.gather = group_of(part).start_all_gather(params_.unit_values(u, part), params_.value_shard(u, part));
  }
  w.values_of = unit;
}

void ShardedUnits::wait_gathered(int unit) {
  start_gather(unit);
  const Clock::time_point start = Clock::now();
  for (Transfers& t : windows_[window_of(unit)].parts) {
    if (t.gather) t.gather->wait();
    t.gather.reset();
  }
  waited_ms_ += ms_since(start);
}

void ShardedUnits::start_reduction(int unit) {
  const size_t window = window_of(unit);
  finish_reduction(window);
  Window& w = windows_[window];
  const size_t u = static_cast<size_t>(unit);
  for (const UnitPart part : kUnitParts) {
    if (!params_.units()[u].has(part)) continue;
    Communicator& group = group_of(part);
    const Tensor grads = params_.unit_grads(u, part), shard = optimizer_.unit_gradient_shard(u, part);
    // The rank's running sum joins its own slice, so the reduce-scatter leaves the total; the
    // first replica's alone when the replicas sum the dense shards after.
    const int64_t n = shard.numel(), r = group.rank();
    const Tensor mine = grads.slice(r * n, (r + 1) * n);
    if (part == UnitPart::Experts || !replicas_ || replicas_->rank() == 0) ops_.add(mine, mine, shard);
    w.parts[unit_part_index(part)].reduction = group.start_reduce_scatter(shard, grads);
  }
  w.reducing = unit;
}

void ShardedUnits::finish_reduction(size_t window) {
  Window& w = windows_[window];
  if (w.reducing < 0) return;
  const Clock::time_point start = Clock::now();
  for (Transfers& t : w.parts) {
    if (t.reduction) t.reduction->wait();
    t.reduction.reset();
  }
  if (replicas_)
    replicas_->all_reduce(optimizer_.unit_gradient_shard(static_cast<size_t>(w.reducing), UnitPart::Dense), ReduceOp::Sum);
  w.reducing = -1;
  waited_ms_ += ms_since(start);
}

WholeValues::WholeValues(ParameterSet& params, Communicator& group, Communicator* experts, Ops& ops)
    : params_(params), group_(group), experts_(experts), ops_(ops) {
  if (!params_.values_sharded()) return;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) memory_.allocate(ops_);
    whole_ = memory_.take({params_.size()}, params_.value_dtype());
  }
  const std::vector<ParameterUnit>& units = params_.units();
  for (size_t u = 0; u < units.size(); ++u)
    for (const UnitPart part : kUnitParts) {
      if (!units[u].has(part)) continue;
      KILN_CHECK(part == UnitPart::Dense || experts_, "whole values: the experts' parts need their group");
      Communicator& group = part == UnitPart::Dense ? group_ : *experts_;
      group.all_gather(whole_.slice(units[u].part(part).first, units[u].part(part).last), params_.value_shard(u, part));
    }
  params_.view_values_in(whole_);
}

WholeValues::~WholeValues() {
  if (params_.values_sharded()) params_.view_values_in(Tensor{});
}

void WholeValues::keep() {
  if (!params_.values_sharded()) return;
  const std::vector<ParameterUnit>& units = params_.units();
  for (size_t u = 0; u < units.size(); ++u)
    for (const UnitPart part : kUnitParts)
      params_.keep_shard(ops_, u, part, whole_.slice(units[u].part(part).first, units[u].part(part).last));
}

}  // namespace kiln
