// Sharded data parallelism at the gradients' and the parameters' levels (parallel.shard =
// gradients | parameters: ZeRO-2 and ZeRO-3; docs/parallelism.md#sharded-data-parallelism).
// The parameter set is laid out in units (ParameterSet::shard_units): each block, the head,
// the embeddings. The optimizer holds each rank's shard of every unit's state and summed
// gradients (AdamW::unit_gradient_shard); the gradients exist whole only in windows, held as
// the unit's UnitHold says:
//   - a block's, and an untied head's and the embeddings', are reduce-scattered into the
//     shards as soon as its backward ends, every micro-batch, while the unit before it
//     computes; its window is then free;
//   - a whole-step unit's (a tied model's head and embeddings: the tied output layer adds to
//     the embedding's gradient at the other end of the step) are reduce-scattered once, after
//     the pipeline's and the tied copies' sums.
// A block's experts (each rank's pieces of them under expert parallelism) are a second part
// of its unit, sharded over the ranks that hold the same experts (the expert-data-parallel
// group) and moved beside the dense part, in windows of their own.
// With the values sharded too, a unit is all-gathered into its window just before its
// forward and again before its backward (the embeddings' backward reads no values), the next
// unit's gather started meanwhile (prefetch); the whole-step units are gathered at the start
// of the step and kept.
// Each reduction adds the rank's running sum into its own slice of the window first, so the
// reduce-scatter leaves the sum over ranks and micro-batches in the shard with no buffer of
// its own. With shard groups smaller than the gradient ranks (parallel.shard_group, HSDP)
// the shard is then all-reduced over the rank's replicas in the other groups, the running
// sum added by the first replica alone (the replicas' sums are equal).
#pragma once

#include <memory>
#include <vector>

#include "trainer/memory/arena.h"
#include "trainer/model/gpt_model.h"
#include "trainer/model/unit_hooks.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/communicator.h"

namespace kiln {

class ShardedUnits final : public UnitHooks {
 public:
  // group: the ranks the units' dense parts are sharded over (the optimizer's shard group);
  // replicas: this rank's place in the other shard groups (parallel.shard_group; null:
  // none), over which each reduced dense shard is summed; experts: the ranks the experts'
  // parts are sharded over (null without experts). prefetch: gather the next unit while one
  // computes (else only when it is needed). Tells the model to report its units here.
  ShardedUnits(GptModel& model, AdamW& optimizer, Communicator& group, Communicator* replicas, Communicator* experts,
               bool prefetch);
  ~ShardedUnits() override;
  ShardedUnits(const ShardedUnits&) = delete;
  ShardedUnits& operator=(const ShardedUnits&) = delete;

  // A training step starts: the gradient shards zeroed, the whole-step units gathered (the
  // caller times it: take_waited_ms() counts from its end).
  void begin_step();
  // Forwards alone follow (validation): the whole-step units gathered.
  void gather_whole_step();
  // The step's backward is over: every block's reduction finished, then the whole-step
  // units' gradients reduce-scattered.
  void end_step();
  // Milliseconds waited for gathers and reductions the computation did not hide, since the
  // last call or begin_step().
  double take_waited_ms();

  void before_reading(int unit, int next) override;
  void before_gradients(int unit) override;
  void after_gradients(int unit) override;

 private:
  // Unit `unit`'s values whole in its window once this returns; started ahead by prefetch.
  void start_gather(int unit);
  void wait_gathered(int unit);
  // The unit's gradients added into the shards: started, and waited for.
  void start_reduction(int unit);
  void finish_reduction(size_t window);
  Communicator& group_of(UnitPart part) const;
  // Which window (by its place in the window memory) a unit takes.
  size_t window_of(int unit) const;

  GptModel& model_;
  AdamW& optimizer_;
  Communicator& group_;
  Communicator* replicas_;
  Communicator* experts_;
  Ops& ops_;
  const ParameterSet& params_;
  bool prefetch_;
  // Per window (its dense part's place in the window memory; the experts' part's windows
  // are taken in the same turns): the unit whose values it holds (-1: none yet), the unit
  // whose gradients it reduces while that is in flight (-1: none), and per part the
  // collectives in flight.
  struct Transfers {
    std::unique_ptr<PendingCollective> gather;
    std::unique_ptr<PendingCollective> reduction;
  };
  struct Window {
    int64_t at = 0;
    int values_of = -1;
    int reducing = -1;
    Transfers parts[std::size(kUnitParts)];
  };
  std::vector<Window> windows_;
  double waited_ms_ = 0;
};

// With the values sharded, a checkpoint reads and writes them whole: for as long as this
// lives, every unit is gathered into a buffer laid out like the flat values, where the
// parameter set's values point (ParameterSet::view_values_in); keep() takes the rank's shards
// back from what was written there. Without sharded values it does nothing.
class WholeValues {
 public:
  // group, experts: the ranks the units' dense and experts' parts are sharded over (a
  // collective over each; experts null without experts).
  WholeValues(ParameterSet& params, Communicator& group, Communicator* experts, Ops& ops);
  ~WholeValues();
  WholeValues(const WholeValues&) = delete;
  WholeValues& operator=(const WholeValues&) = delete;

  void keep();

 private:
  ParameterSet& params_;
  Communicator& group_;
  Communicator* experts_;
  Ops& ops_;
  Arena memory_{"whole values"};
  Tensor whole_;
};

}  // namespace kiln
