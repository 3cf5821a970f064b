#include "trainer/parallel/layout.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {

ParallelLayout::ParallelLayout(const ParallelConfig& config, int world_size)
    : world_(world_size), tp_(config.tp), pp_(config.pp), vpp_(config.vpp), ep_(config.ep),
      etp_(config.etp == 0 ? config.tp : config.etp), cp_(config.cp) {
  KILN_CHECK(tp_ >= 1 && pp_ >= 1 && vpp_ >= 1 && ep_ >= 1 && cp_ >= 1,
             "parallel: tp, cp, pp, vpp and ep must be at least 1");
  KILN_CHECK(etp_ == 1 || etp_ == tp_, "parallel: etp must be 1 or tp");
  const int model_parallel = tp_ * cp_ * pp_;
  const std::string factors = cp_ > 1 ? fmt::format("parallel.tp={} x parallel.cp={} x parallel.pp={}", tp_, cp_, pp_)
                                      : fmt::format("parallel.tp={} x parallel.pp={}", tp_, pp_);
  if (world_size < 1 || world_size % model_parallel != 0)
    fail(fmt::format("parallel: {} {} not fit {} = {}: the world size must be a multiple of {} "
                     "(data-parallel size = world / {})",
                     world_size, world_size == 1 ? "process does" : "processes do", factors,
                     model_parallel, model_parallel, model_parallel));
  dp_ = world_size / model_parallel;
  if (!whole_experts() && dp_ % ep_ != 0)
    fail(fmt::format("parallel: parallel.ep={} does not divide the {} data-parallel rank{} (world {} / "
                     "(tp {} x pp {})): expert parallelism splits the data-parallel ranks",
                     ep_, dp_, dp_ == 1 ? "" : "s", world_size, tp_, pp_));
  if (whole_experts() && tp_ * dp_ % ep_ != 0)
    fail(fmt::format("parallel: parallel.ep={} does not divide the {} ranks of a pipeline stage (world {} / "
                     "pp {}): with parallel.etp=1 expert parallelism splits a stage's tensor and "
                     "data-parallel ranks together", ep_, tp_ * dp_, world_size, pp_));
  shard_group_ = config.shard_group > 0 ? config.shard_group : cp_ * dp_;
  if ((cp_ * dp_) % shard_group_ != 0)
    fail(fmt::format("parallel: parallel.shard_group={} does not divide the {} ranks that sum each gradient "
                     "(dp {} x cp {})",
                     config.shard_group, cp_ * dp_, dp_, cp_));
}

RankCoordinates ParallelLayout::coordinates(int rank) const {
  KILN_CHECK(rank >= 0 && rank < world_,
             fmt::format("parallel: rank {} is outside a world of {}", rank, world_));
  const int within = rank / tp_;  // cp_rank + cp * (dp_rank + dp * pp_rank)
  return {rank % tp_, within / cp_ % dp_, within / (cp_ * dp_), within % cp_};
}

int ParallelLayout::rank_of(const RankCoordinates& c) const {
  return c.tp + tp_ * (c.cp + cp_ * (c.dp + dp_ * c.pp));
}

ExpertCoordinates ParallelLayout::expert_coordinates(int rank) const {
  const RankCoordinates c = coordinates(rank);
  const int i = c.tp + tp_ * c.dp, unit = i / etp_;
  return {i % etp_, unit % ep_, unit / ep_};
}

std::vector<int> ParallelLayout::expert_units(int rank, const std::vector<ExpertCoordinates>& units) const {
  const int stage = coordinates(rank).pp, etp_rank = expert_coordinates(rank).etp;
  std::vector<int> group;
  for (const ExpertCoordinates& u : units)
    group.push_back(etp_rank + etp_ * (u.ep + ep_ * u.edp) + tp_ * cp_ * dp_ * stage);
  return group;
}

std::vector<int> ParallelLayout::tensor_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.tp = 0; c.tp < tp_; ++c.tp) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelLayout::context_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.cp = 0; c.cp < cp_; ++c.cp) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelLayout::gradient_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.dp = 0; c.dp < dp_; ++c.dp)
    for (c.cp = 0; c.cp < cp_; ++c.cp) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelLayout::shard_group(int rank) const {
  const std::vector<int> all = gradient_group(rank);
  const auto at = std::find(all.begin(), all.end(), rank) - all.begin();
  const auto first = at / shard_group_ * shard_group_;
  return {all.begin() + first, all.begin() + first + shard_group_};
}

std::vector<int> ParallelLayout::shard_replica_group(int rank) const {
  const std::vector<int> all = gradient_group(rank);
  const auto at = std::find(all.begin(), all.end(), rank) - all.begin();
  std::vector<int> group;
  for (auto i = at % shard_group_; i < static_cast<int64_t>(all.size()); i += shard_group_)
    group.push_back(all[static_cast<size_t>(i)]);
  return group;
}

std::vector<int> ParallelLayout::data_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.dp = 0; c.dp < dp_; ++c.dp) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelLayout::pipeline_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.pp = 0; c.pp < pp_; ++c.pp) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelLayout::expert_group(int rank) const {
  const ExpertCoordinates me = expert_coordinates(rank);
  std::vector<ExpertCoordinates> units;
  for (int ep = 0; ep < ep_; ++ep) units.push_back({me.etp, ep, me.edp});
  return expert_units(rank, units);
}

std::vector<int> ParallelLayout::expert_data_group(int rank) const {
  const ExpertCoordinates me = expert_coordinates(rank);
  std::vector<ExpertCoordinates> units;
  for (int edp = 0; edp < this->edp(); ++edp) units.push_back({me.etp, me.ep, edp});
  return expert_units(rank, units);
}

std::string ParallelLayout::model_share() const {
  const std::string model = fmt::format("1/{} of the model", tp_ * pp_);
  if (etp_ * ep_ == tp_) return model;  // the experts split as the rest
  const std::string experts = fmt::format("1/{} of the experts", etp_ * pp_ * ep_);
  return tp_ * pp_ == 1 ? experts : model + " and " + experts;
}

std::string ParallelLayout::name() const {
  const std::string name = cp_ > 1 ? fmt::format("tp{}.cp{}.pp{}.dp{}", tp_, cp_, pp_, dp_)
                                   : fmt::format("tp{}.pp{}.dp{}", tp_, pp_, dp_);
  const std::string experts = ep_ > 1 ? fmt::format("{}.ep{}", name, ep_) : name;
  return whole_experts() ? fmt::format("{}.etp{}", experts, etp_) : experts;
}

}  // namespace kiln
