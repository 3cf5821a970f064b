#include "trainer/parallel/layout.h"

#include <fmt/core.h>

#include "kernels/check.h"

namespace kiln {

ParallelLayout::ParallelLayout(const ParallelConfig& config, int world_size)
    : world_(world_size), tp_(config.tp), pp_(config.pp), vpp_(config.vpp), ep_(config.ep) {
  KILN_CHECK(tp_ >= 1 && pp_ >= 1 && vpp_ >= 1 && ep_ >= 1,
             "parallel: tp, pp, vpp and ep must be at least 1");
  const int model_parallel = tp_ * pp_;
  if (world_size < 1 || world_size % model_parallel != 0)
    fail(fmt::format("parallel: {} {} not fit parallel.tp={} x parallel.pp={} = {}: the world "
                     "size must be a multiple of {} (data-parallel size = world / {})",
                     world_size, world_size == 1 ? "process does" : "processes do", tp_, pp_,
                     model_parallel, model_parallel, model_parallel));
  dp_ = world_size / model_parallel;
  if (dp_ % ep_ != 0)
    fail(fmt::format("parallel: parallel.ep={} does not divide the {} data-parallel rank{} (world {} / "
                     "(tp {} x pp {})): expert parallelism splits the data-parallel ranks",
                     ep_, dp_, dp_ == 1 ? "" : "s", world_size, tp_, pp_));
}

RankCoordinates ParallelLayout::coordinates(int rank) const {
  KILN_CHECK(rank >= 0 && rank < world_,
             fmt::format("parallel: rank {} is outside a world of {}", rank, world_));
  return {rank % tp_, (rank / tp_) % dp_, rank / (tp_ * dp_)};
}

int ParallelLayout::rank_of(const RankCoordinates& c) const {
  return c.tp + tp_ * (c.dp + dp_ * c.pp);
}

ExpertCoordinates ParallelLayout::expert_coordinates(int rank) const {
  const int dp = coordinates(rank).dp;
  return {dp % ep_, dp / ep_};
}

std::vector<int> ParallelLayout::tensor_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.tp = 0; c.tp < tp_; ++c.tp) group.push_back(rank_of(c));
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
  RankCoordinates c = coordinates(rank);
  const int first = c.dp - c.dp % ep_;
  std::vector<int> group;
  for (c.dp = first; c.dp < first + ep_; ++c.dp) group.push_back(rank_of(c));
  return group;
}

std::vector<int> ParallelLayout::expert_data_group(int rank) const {
  RankCoordinates c = coordinates(rank);
  std::vector<int> group;
  for (c.dp %= ep_; c.dp < dp_; c.dp += ep_) group.push_back(rank_of(c));
  return group;
}

std::string ParallelLayout::model_share() const {
  const std::string model = fmt::format("1/{} of the model", tp_ * pp_);
  if (ep_ == 1) return model;
  const std::string experts = fmt::format("1/{} of the experts", tp_ * pp_ * ep_);
  return tp_ * pp_ == 1 ? experts : model + " and " + experts;
}

std::string ParallelLayout::name() const {
  const std::string name = fmt::format("tp{}.pp{}.dp{}", tp_, pp_, dp_);
  return ep_ > 1 ? fmt::format("{}.ep{}", name, ep_) : name;
}

}  // namespace kiln
