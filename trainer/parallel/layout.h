// The rank topology of a run, in Megatron-LM's order: ranks run tensor-parallel fastest,
// then data-parallel, then pipeline-parallel, so
//
//   rank = tp_rank + tp * (dp_rank + dp * pp_rank)
//
// and the tp ranks of a tensor group are neighbours (one node, when a node holds tp or more
// devices), the data-parallel replicas of a stage come next, and the pipeline stages are the
// outermost split. dp is derived: world / (tp * pp).
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace kiln {

struct RankCoordinates {
  int tp = 0;  // position in the tensor-parallel group
  int dp = 0;  // data-parallel replica
  int pp = 0;  // pipeline stage
};

class ParallelLayout {
 public:
  // Refuses, with the arithmetic, a world size that tp * pp does not divide.
  ParallelLayout(const ParallelConfig& config, int world_size);

  int world() const { return world_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int vpp() const { return vpp_; }
  int dp() const { return dp_; }

  RankCoordinates coordinates(int rank) const;
  int rank_of(const RankCoordinates& c) const;

  // The ranks of rank's groups, in group order (a group's rank i is its member i).
  std::vector<int> tensor_group(int rank) const;    // same dp and pp
  std::vector<int> data_group(int rank) const;      // same tp and pp
  std::vector<int> pipeline_group(int rank) const;  // same tp and dp

  // Megatron's name for the layout: "tp2.pp2.dp2".
  std::string name() const;

 private:
  int world_, tp_, pp_, vpp_, dp_;
};

}  // namespace kiln
