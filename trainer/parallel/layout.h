// The rank topology of a run, in Megatron-LM's order: ranks run tensor-parallel fastest,
// then context-parallel, then data-parallel, then pipeline-parallel, so
//
//   rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))
//
// and the tp ranks of a tensor group are neighbours (one node, when a node holds tp or more
// devices), the context-parallel ranks that share a sequence come next, then the
// data-parallel replicas of a stage, and the pipeline stages are the outermost split. dp is
// derived: world / (tp * cp * pp). A context group's ranks hold the same parameters, so the
// gradients are summed over the data-parallel and context-parallel ranks together.
//
// Expert parallelism lives inside the data-parallel dimension (Megatron's rule). The experts
// have a layout of their own within a stage (Megatron's MoE parallel folding): its tp * dp
// ranks, i = tp_rank + tp * dp_rank, are cut into expert-tensor groups of etp consecutive
// ranks (the tensor groups when etp = tp; single ranks when etp = 1), and those units
// u = i / etp into expert groups of ep consecutive units, u = ep_rank + ep * edp_rank. An
// expert group splits each MoE layer's experts and trades tokens; the units that hold the
// same experts (same ep_rank) form an expert-data group, which sums those experts' gradients.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace kiln {

struct RankCoordinates {
  int tp = 0;  // position in the tensor-parallel group
  int dp = 0;  // data-parallel replica
  int pp = 0;  // pipeline stage
  int cp = 0;  // position in the context-parallel group: its share of each sequence
};

// Where a rank sits in the experts' layout.
struct ExpertCoordinates {
  int etp = 0;  // position in the expert-tensor group: its share of each expert's hidden units
  int ep = 0;   // position in the expert group: the share of each layer's experts it holds
  int edp = 0;  // position among the units that hold the same experts
};

class ParallelLayout {
 public:
  // Refuses, with the arithmetic, a world size that tp * cp * pp does not divide.
  ParallelLayout(const ParallelConfig& config, int world_size);

  int world() const { return world_; }
  int tp() const { return tp_; }
  int cp() const { return cp_; }
  int pp() const { return pp_; }
  int vpp() const { return vpp_; }
  int dp() const { return dp_; }
  int ep() const { return ep_; }
  int etp() const { return etp_; }
  int edp() const { return tp_ * dp_ / (etp_ * ep_); }
  // Whether the experts have groups of their own: split over an expert group, or whole on
  // each tensor rank (etp 1 under tp > 1), their gradients summed over other ranks than the
  // dense parameters'.
  bool expert_layout() const { return ep_ > 1 || whole_experts(); }
  // parallel.etp=1 under tp > 1: every expert whole on each tensor rank.
  bool whole_experts() const { return etp_ != tp_; }

  RankCoordinates coordinates(int rank) const;
  int rank_of(const RankCoordinates& c) const;
  ExpertCoordinates expert_coordinates(int rank) const;

  // The ranks of rank's groups, in group order (a group's rank i is its member i).
  std::vector<int> tensor_group(int rank) const;    // same cp, dp and pp
  std::vector<int> context_group(int rank) const;   // same tp, dp and pp
  std::vector<int> data_group(int rank) const;      // same tp, cp and pp
  std::vector<int> pipeline_group(int rank) const;  // same tp, cp and dp
  // The ranks that sum the gradients of the parameters rank holds: same tp and pp (the data
  // group when cp is 1).
  std::vector<int> gradient_group(int rank) const;
  // parallel.shard_group: the ranks of rank's gradient group that share its sharded state
  // (consecutive members of the gradient group), and the ranks at its place in the others
  // (its replicas, which sum its shards). Whether the gradient group is so split.
  std::vector<int> shard_group(int rank) const;
  std::vector<int> shard_replica_group(int rank) const;
  bool replicates_shards() const { return shard_group_ < cp_ * dp_; }
  std::vector<int> expert_group(int rank) const;       // same pp, etp and edp
  std::vector<int> expert_data_group(int rank) const;  // same pp, etp and ep

  // Whether a rank holds less than the whole model (tp, pp or ep above 1), and how much:
  // "1/4 of the model", "1/2 of the experts", "1/2 of the model and 1/4 of the experts".
  bool splits_model() const { return tp_ > 1 || pp_ > 1 || ep_ > 1; }
  std::string model_share() const;

  // Megatron's name for the layout: "tp2.pp2.dp2", "tp2.cp2.pp2.dp2" with context
  // parallelism, ".ep2" with expert parallelism and ".etp1" when the experts' tensor split
  // differs from tp.
  std::string name() const;

 private:
  // The ranks of rank's stage at the expert units ep_rank + ep * edp_rank for each (ep_rank,
  // edp_rank) of `units`, at rank's etp position.
  std::vector<int> expert_units(int rank, const std::vector<ExpertCoordinates>& units) const;

  int world_, tp_, pp_, vpp_, dp_, ep_, etp_, cp_;
  int shard_group_;  // ranks a shard group holds
};

}  // namespace kiln
