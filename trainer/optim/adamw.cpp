#include "trainer/optim/adamw.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "base/check.h"

namespace kiln {

namespace {
bool mixed_precision(DType value_dtype) {
  return value_dtype == DType::BF16 || value_dtype == DType::F16;
}
}  // namespace

size_t AdamW::state_bytes_per_element(DType value_dtype) {
  return (mixed_precision(value_dtype) ? 3 : 2) * dtype_size(value_dtype == DType::F64 ? DType::F64
                                                                                       : DType::F32);
}

namespace {
bool counts_as_one(Communicator* group) { return !group || group->size() == 1; }

// A segment table's (begin, end, decay) rows ordered by begin, as the adamw op walks them
// (kernels/ops.h). The parameters come in backward's order, which under expert parallelism
// alternates between the dense region and the experts' after it: a table over both regions
// (the optimizer unsharded) would list each layer's experts before the next layer's dense
// parameters. The CUDA kernel, which finds a chunk's segments by binary search, then skipped
// parameters and stopped at the last dense one; the CPU refuses such a table.
void sort_by_begin(std::vector<int64_t>& table) {
  std::vector<std::array<int64_t, 3>> rows(table.size() / 3);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = {table[3 * i], table[3 * i + 1], table[3 * i + 2]};
  std::sort(rows.begin(), rows.end());
  for (size_t i = 0; i < rows.size(); ++i) std::copy(rows[i].begin(), rows[i].end(), table.begin() + 3 * i);
}
}  // namespace

AdamW::StateLayout AdamW::lay_out(const ParameterSet& params, const OptimizerGroups& groups) {
  // Sharded, the dense region is cut over the data-parallel ranks and the experts' region
  // over the expert-data-parallel ones; otherwise one region holds it all.
  StateLayout layout;
  const int64_t dense = params.dense_size(), n = params.size();
  const auto region = [](Communicator* group, int64_t first, int64_t last) {
    Region r;
    r.group = group;
    r.first = first;
    r.last = last;
    return r;
  };
  if (!params.units().empty()) {
    // Sharded in units (parallel.shard=gradients or parameters): each part of a unit is a
    // region, so a rank's state is its shard of each, reduced and gathered unit by unit. The
    // dense parts come first, region i being unit i's; then the experts', over the ranks
    // that hold the same experts.
    KILN_CHECK(groups.shard && groups.shard->size() == params.unit_shards(UnitPart::Dense),
               "parameter units sharded over " + std::to_string(params.unit_shards(UnitPart::Dense)) +
                   " ranks need a shard group of as many");
    KILN_CHECK(n == dense || (groups.expert_shard && groups.expert_shard->size() == params.unit_shards(UnitPart::Experts)),
               "the units' experts sharded over " + std::to_string(params.unit_shards(UnitPart::Experts)) +
                   " ranks need an expert-data group of as many");
    for (const UnitPart part : kUnitParts) {
      const std::vector<ParameterUnit>& units = params.units();
      for (size_t u = 0; u < units.size(); ++u) {
        if (part == UnitPart::Experts && !units[u].has(part)) continue;
        const UnitSpan& span = units[u].part(part);
        layout.regions.push_back(region(part == UnitPart::Dense ? groups.shard : groups.expert_shard, span.first, span.last));
        layout.regions.back().unit = static_cast<int>(u);
        layout.regions.back().part = part;
      }
    }
  } else if (!counts_as_one(groups.shard)) {
    layout.regions.push_back(region(groups.shard, 0, dense));
    KILN_CHECK(n == dense || groups.expert_shard, "a sharded experts' region needs its group");
    if (n > dense) layout.regions.push_back(region(groups.expert_shard, dense, n));
  } else {
    layout.regions.push_back(region(nullptr, 0, n));
  }
  for (Region& r : layout.regions) {
    const int shards = r.group ? r.group->size() : 1;
    const int64_t size = r.last - r.first;
    KILN_CHECK(size % shards == 0, "the flat parameter buffer's region of " + std::to_string(size) +
                                       " elements does not cut into " + std::to_string(shards) + " shards");
    r.begin = r.first + size / shards * (r.group ? r.group->rank() : 0);
    r.end = r.begin + size / shards;
    r.state_at = layout.size;
    layout.size += r.end - r.begin;
  }
  // Each region's segment table covers its shard: each parameter's part of it, from the
  // shard's start. The first rank of a tensor group counts its pieces and the whole
  // parameters every rank of the group holds alike in the gradient norm; the others count
  // their pieces alone (and whole experts, which differ between them). Copies count on the
  // stage that owns them.
  const bool first_of_group = !groups.tensor || groups.tensor->rank() == 0;
  layout.tables.resize(layout.regions.size());
  for (size_t i = 0; i < layout.regions.size(); ++i) {
    const Region& r = layout.regions[i];
    for (const Parameter& p : params.all()) {
      if (p.frozen) continue;  // in no flat buffer
      const int64_t first = std::max(p.offset, r.begin);
      const int64_t last = std::min(p.offset + p.value.numel(), r.end);
      if (first >= last) continue;
      layout.tables[i].insert(layout.tables[i].end(), {first - r.begin, last - r.begin, p.decay ? 1 : 0});
      const bool counts =
          !p.copy && (first_of_group || p.split.tensor_sharded() || (p.expert && groups.whole_experts));
      if (counts)
        layout.norm_ranges.push_back({first - r.begin + r.state_at, last - r.begin + r.state_at, p.expert});
      layout.norm_all = layout.norm_all && counts && !p.expert;
    }
  }
  for (std::vector<int64_t>& table : layout.tables) {
    sort_by_begin(table);
    if (table.empty()) table = {0, 0, 0};
  }
  return layout;
}

AdamW::StateTensors AdamW::take_state(Arena& state, StateLayout& layout, bool mixed, bool sharded, DType dtype) {
  const Shape shard{layout.size};
  StateTensors t;
  if (mixed) t.master = state.take(shard, dtype);
  t.m = state.take(shard, dtype);
  t.v = state.take(shard, dtype);
  if (sharded) t.grad_shard = state.take(shard, dtype);
  for (size_t i = 0; i < layout.regions.size(); ++i)
    layout.regions[i].segments = state.take({static_cast<int64_t>(layout.tables[i].size() / 3), 3}, DType::I64);
  t.scalars = state.take({kOptimizerScalars}, DType::F64);
  return t;
}

size_t AdamW::planned_bytes(const ParameterSet& params, const OptimizerGroups& groups) {
  StateLayout layout = lay_out(params, groups);
  Arena state("optimizer");
  take_state(state, layout, mixed_precision(params.value_dtype()), !counts_as_one(groups.shard), params.grad_dtype());
  return state.bytes();
}

AdamW::AdamW(const TrainConfig& train, ParameterSet& params, Ops& ops, const OptimizerGroups& groups)
    : train_(train), params_(params), ops_(ops), groups_(groups),
      sharded_(!counts_as_one(groups.shard)), mixed_(mixed_precision(params.value_dtype())) {
  StateLayout layout = lay_out(params_, groups_);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) state_.allocate(ops_);
    const StateTensors t = take_state(state_, layout, mixed_, sharded(), params_.grad_dtype());
    master_ = t.master;
    m_ = t.m;
    v_ = t.v;
    grad_shard_ = t.grad_shard;
    scalars_ = t.scalars;
  }
  host_scalars_ = static_cast<double*>(ops_.allocate_host(kOptimizerScalars * sizeof(double)));
  regions_ = std::move(layout.regions);
  norm_ranges_ = std::move(layout.norm_ranges);
  norm_all_ = layout.norm_all;
  const std::vector<std::vector<int64_t>>& tables = layout.tables;
  state_.check_complete();
  if (mixed_) {
    for (size_t i = 0; i < regions_.size(); ++i) ops_.cast(regions_[i].state(master_), region_values(i));
  } else {
    // The parameters are the master weights; sharded values are each region's own
    // (region_values), no one tensor.
    master_ = params_.values_sharded() ? Tensor{} : params_.flat_values();
  }
  if (!sharded()) grad_shard_ = params_.flat_grads();
  for (size_t i = 0; i < regions_.size(); ++i) ops_.copy_from_host(regions_[i].segments, tables[i].data());
}

Tensor AdamW::region_whole_values(size_t i) const {
  KILN_CHECK(!params_.values_sharded(), "a unit's values are whole only in its window");
  return params_.flat_values().slice(regions_[i].first, regions_[i].last);
}

Tensor AdamW::region_values(size_t i) const {
  const Region& r = regions_[i];
  if (params_.values_sharded()) return params_.value_shard(static_cast<size_t>(r.unit), r.part);
  return region_whole_values(i).slice(r.begin - r.first, r.end - r.first);
}

Tensor AdamW::unit_gradient_shard(size_t unit, UnitPart part) const {
  const auto region = std::find_if(regions_.begin(), regions_.end(), [&](const Region& r) {
    return r.unit == static_cast<int>(unit) && r.part == part;
  });
  KILN_CHECK(region != regions_.end(), "no region holds unit " + std::to_string(unit) + "'s part");
  return region->state(grad_shard_);
}

void AdamW::zero_gradient_shards() { ops_.fill(grad_shard_, 0.0); }

void AdamW::reduce_scatter_gradients() {
  KILN_CHECK(sharded(), "reduce_scatter_gradients needs a sharded optimizer");
  KILN_CHECK(params_.units().empty(), "units are reduced unit by unit (trainer/train/sharded_units.h)");
  for (const Region& r : regions_) r.group->reduce_scatter(r.state(grad_shard_), params_.flat_grads().slice(r.first, r.last));
  // The shard groups' sums, summed over the groups (the experts' region has its own ranks).
  if (groups_.shard_replicas)
    groups_.shard_replicas->all_reduce(regions_.front().state(grad_shard_), ReduceOp::Sum);
}

AdamW::~AdamW() { ops_.release_host(host_scalars_); }

bool AdamW::norm_over_ranks() const {
  return sharded() || !counts_as_one(groups_.expert) || !counts_as_one(groups_.tensor) ||
         !counts_as_one(groups_.pipeline);
}

void AdamW::sum_norm_over_ranks() {
  double parts[2];  // kDenseSumSquares, kExpertSumSquares
  const Tensor summed = scalars_.slice(kDenseSumSquares, kExpertSumSquares + 1);
  ops_.copy_to_host(parts, summed);
  double dense = parts[0], expert = parts[1];
  // Sharded, every data-parallel rank holds a different shard of each region. Otherwise the
  // replicas hold the same gradients, but the ranks of an expert group different experts.
  if (!sharded() && !counts_as_one(groups_.expert))
    groups_.expert->all_reduce(Tensor{&expert, DType::F64, {1}}, ReduceOp::Sum);
  // Whole experts: each tensor rank now holds every expert's sum (an expert group spans the
  // tensor ranks, or each holds them all), which the tensor group's sum below counts once.
  if (!sharded() && groups_.whole_experts && groups_.tensor && groups_.tensor->rank() != 0) expert = 0;
  if (sharded()) {
    // Each rank of the shard group holds a different shard of the dense region, and of its
    // experts' region. Under shard groups (HSDP) the copies in the other groups hold the same
    // dense shards but other experts' (the experts are sharded over all the ranks that hold
    // them), so the experts' part is summed over the copies too.
    double both[] = {dense, expert};
    groups_.shard->all_reduce(Tensor{both, DType::F64, {2}}, ReduceOp::Sum);
    if (!counts_as_one(groups_.shard_replicas))
      groups_.shard_replicas->all_reduce(Tensor{&both[1], DType::F64, {1}}, ReduceOp::Sum);
    dense = both[0];
    expert = both[1];
  }
  double sum = dense + expert;
  const Tensor total{&sum, DType::F64, {1}};
  if (!counts_as_one(groups_.tensor)) groups_.tensor->all_reduce(total, ReduceOp::Sum);
  if (!counts_as_one(groups_.pipeline)) groups_.pipeline->all_reduce(total, ReduceOp::Sum);
  // The whole sum in the dense part: clip_rule adds the two.
  parts[0] = sum;
  parts[1] = 0;
  ops_.copy_from_host(summed, parts);
}

OptimizerStep AdamW::step(double lr, double loss_scale) {
  prepare(lr, loss_scale);
  queue_update();
  return finish();
}

void AdamW::prepare(double lr, double loss_scale) {
  // The squared norm's parts start at zero: sum_squares adds to them.
  std::fill(host_scalars_, host_scalars_ + kOptimizerScalars, 0.0);
  const AdamWTerms terms = adamw_terms(lr, train_.beta1, train_.beta2, train_.weight_decay, step_ + 1);
  host_scalars_[kLossScale] = loss_scale;
  host_scalars_[kClipGrad] = train_.clip_grad;
  host_scalars_[kStepSize] = terms.step_size;
  host_scalars_[kRootCorrection2] = terms.root_correction2;
  host_scalars_[kDecay] = terms.decay;
}

void AdamW::queue_update() {
  ops_.copy_from_pinned(scalars_, host_scalars_);
  const Tensor grads = grad_shard_;
  if (norm_all_) {
    ops_.sum_squares(scalar(kDenseSumSquares), grads);
  } else {
    for (const NormRange& r : norm_ranges_)
      ops_.sum_squares(scalar(r.expert ? kExpertSumSquares : kDenseSumSquares), grads.slice(r.first, r.last));
  }
  if (norm_over_ranks()) sum_norm_over_ranks();
  // PyTorch's clip_grad_norm_ rule, epsilon included, so the two clip identically; a step
  // whose gradients are not finite is skipped on the device.
  ops_.clip_factor(scalars_);
  AdamWStep s;
  s.beta1 = train_.beta1;
  s.beta2 = train_.beta2;
  s.eps = train_.adam_eps;
  s.scalars = scalars_;
  for (size_t i = 0; i < regions_.size(); ++i) {
    const Region& r = regions_[i];
    const Tensor shard = region_values(i);
    ops_.adamw(mixed_ ? r.state(master_) : shard, r.state(grads), r.state(m_),
               r.state(v_), mixed_ ? shard : Tensor{}, r.segments, s);
    // Every rank takes the others' updated shards (unchanged when the step was skipped); its
    // own is already in place. Sharded values are gathered unit by unit when used.
    if (sharded() && !(params_.values_sharded() && unit_region(i))) r.group->all_gather(region_whole_values(i), shard);
  }
}

OptimizerStep AdamW::finish() {
  double s[kOptimizerScalars];
  ops_.copy_to_host(s, scalars_);
  const OptimizerStep result{s[kGradNorm], s[kSkip] != 0};
  if (!result.skipped) ++step_;
  return result;
}

OptimizerState AdamW::whole_buffers() const {
  OptimizerState whole;
  whole.master_copy = mixed_;
  whole.memory = std::make_unique<Arena>("optimizer state");
  const Shape flat{params_.size()};
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) whole.memory->allocate(ops_);
    if (mixed_) whole.master = whole.memory->take(flat, params_.grad_dtype());
    whole.exp_avg = whole.memory->take(flat, params_.grad_dtype());
    whole.exp_avg_sq = whole.memory->take(flat, params_.grad_dtype());
  }
  // Unmixed, the parameters are the master weights: a checkpoint takes them from the model.
  if (!mixed_ && !params_.values_sharded()) whole.master = params_.flat_values();
  return whole;
}

OptimizerState AdamW::state_for_checkpoint() {
  if (!sharded()) return {master_, m_, v_, mixed_, nullptr};
  bool root = false;
  for (const Region& r : regions_) root = root || r.group->rank() == 0;
  OptimizerState whole = root ? whole_buffers() : OptimizerState{};
  for (const Region& r : regions_) {
    const bool region_root = r.group->rank() == 0;
    const auto in_whole = [&](const Tensor& t) { return region_root ? t.slice(r.first, r.last) : Tensor{}; };
    r.group->gather(in_whole(whole.exp_avg), r.state(m_), 0);
    r.group->gather(in_whole(whole.exp_avg_sq), r.state(v_), 0);
    if (mixed_) r.group->gather(in_whole(whole.master), r.state(master_), 0);
  }
  return whole;
}

OptimizerState AdamW::state_to_restore() {
  if (!sharded()) return {master_, m_, v_, mixed_, nullptr};
  return whole_buffers();
}

void AdamW::restored(const OptimizerState& state, int64_t steps) {
  step_ = steps;
  if (!sharded()) return;
  for (const Region& r : regions_) {
    ops_.cast(r.state(m_), state.exp_avg.slice(r.begin, r.end));
    ops_.cast(r.state(v_), state.exp_avg_sq.slice(r.begin, r.end));
    if (mixed_) ops_.cast(r.state(master_), state.master.slice(r.begin, r.end));
  }
}

}  // namespace kiln
