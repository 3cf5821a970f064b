#include "trainer/parallel/layout.h"

#include <fmt/core.h>

#include "kernels/check.h"

namespace kiln {

ParallelLayout::ParallelLayout(const ParallelConfig& config, int world_size)
    : world_(world_size), tp_(config.tp), pp_(config.pp), vpp_(config.vpp) {
  KILN_CHECK(tp_ >= 1 && pp_ >= 1 && vpp_ >= 1, "parallel: tp, pp and vpp must be at least 1");
  const int model_parallel = tp_ * pp_;
  if (world_size < 1 || world_size % model_parallel != 0)
    fail(fmt::format("parallel: {} {} not fit parallel.tp={} x parallel.pp={} = {}: the world "
                     "size must be a multiple of {} (data-parallel size = world / {})",
                     world_size, world_size == 1 ? "process does" : "processes do", tp_, pp_,
                     model_parallel, model_parallel, model_parallel));
  dp_ = world_size / model_parallel;
}

RankCoordinates ParallelLayout::coordinates(int rank) const {
  KILN_CHECK(rank >= 0 && rank < world_,
             fmt::format("parallel: rank {} is outside a world of {}", rank, world_));
  return {rank % tp_, (rank / tp_) % dp_, rank / (tp_ * dp_)};
}

int ParallelLayout::rank_of(const RankCoordinates& c) const {
  return c.tp + tp_ * (c.dp + dp_ * c.pp);
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

std::string ParallelLayout::name() const { return fmt::format("tp{}.pp{}.dp{}", tp_, pp_, dp_); }

}  // namespace kiln
