// What each pipeline stage runs, and in which order, for one optimizer step: Megatron-LM's
// 1F1B schedule (parallel.vpp = 1) and its interleaved 1F1B (vpp > 1, each rank holding vpp
// chunks of layers, the model's chunks dealt round the stages: chunk c of stage s is
// virtual stage c * pp + s).
//
// 1F1B: stage s first runs min(pp - s - 1, m) forwards (warm-up), then alternates one
// forward and one backward (steady state), then runs the backwards left (cool-down), so it
// holds at most pp - s micro-batches' activations at once.
// Interleaved: the same over m * vpp (micro-batch, chunk) units, with warm-up
// (pp - s - 1) * 2 + (vpp - 1) * pp (everything when m == pp); units go round in groups of pp
// micro-batches, chunk by chunk, forwards in chunk order and backwards in reverse.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// What a step runs of its (micro-batch, chunk): the forward, or the backward whole (the input's
// gradient and the weights') or split in two as the zero-bubble schedules run it
// (zero_bubble_schedule.h): the input's gradient, which the stage before waits for, and the
// weights' gradient, which can wait.
enum class PipelinePass { Forward, Backward, InputGradient, WeightGradient };

struct PipelineStep {
  PipelinePass pass = PipelinePass::Forward;
  int micro_batch = 0;
  int chunk = 0;  // the rank's model chunk (0 without interleaving)
  bool forward() const { return pass == PipelinePass::Forward; }
  bool operator==(const PipelineStep&) const = default;
};

// Where each virtual stage of a pipeline sits: pp ranks hold `chunks` chunks each, dealt round
// the ranks (interleaved: chunk c of rank s is virtual stage c * pp + s), or for two chunks in
// a V (the zero-bubble V schedules): rank s holds virtual stages s and 2 pp - 1 - s, so the
// first rank holds the first and the last.
struct PipelinePlacement {
  int pp = 1;
  int chunks = 1;
  bool v_shape = false;
  int stages() const { return pp * chunks; }
  int stage_of(int rank, int chunk) const {
    return v_shape && chunk == 1 ? 2 * pp - 1 - rank : chunk * pp + rank;
  }
  int rank_of(int stage) const { return v_shape && stage >= pp ? 2 * pp - 1 - stage : stage % pp; }
  int chunk_of(int stage) const { return stage / pp; }
};

struct PipelineSchedule {
  int warmup = 0;  // forwards before the first backward
  std::vector<PipelineStep> steps;
};

// The schedule of `stage` (0 .. pp - 1) for m micro-batches. Interleaving needs m to be a
// multiple of pp (as in Megatron): refused otherwise, with the numbers.
PipelineSchedule pipeline_schedule(int pp, int vpp, int stage, int micro_batches);

// Activation slots a stage's schedule needs: a micro-batch holds its slot from its first
// step to its last, and micro-batch i takes slot i % slots; this is the widest span of
// micro-batches in flight at once (pp - stage under 1F1B). With `chunk` >= 0, of that chunk's
// steps alone: the slots its activations need, each chunk taking its micro-batches in order.
int pipeline_slots(const PipelineSchedule& schedule, int chunk = -1);

// The most chunks' activations a stage's schedule holds at once: each from its forward to its
// weights' gradient (or its whole backward).
int most_chunks_held(const PipelineSchedule& schedule);

// Per step: whether it is the last of the step to touch its chunk's gradients while every
// later chunk of the model, which the flat gradient buffer holds before it, finished earlier;
// from such a step data parallelism may reduce the chunk's gradients (pipeline_executor.h).
std::vector<bool> gradient_finishing_steps(const PipelineSchedule& schedule, int chunks);

// Forwards alone, micro-batch by micro-batch and chunk by chunk (validation).
PipelineSchedule pipeline_forwards(int vpp, int micro_batches);

}  // namespace kiln
