// Runs one pipeline stage's part of a step (trainer/parallel/pipeline_schedule.h) on its
// model: a forward of a chunk without the embedding first receives its input activations
// from the stage before, and a chunk without the head sends its output to the stage after;
// a backward receives the gradient of its output from the stage after and sends the
// gradient of its input to the stage before. One rank without pipelining runs the same way as
// the one stage of a one-stage schedule (each micro-batch's forward, then its backward), with
// no channels to open.
//
// Sends are started and left to finish while receives wait, so a stage never waits on a
// neighbour that waits on it: every schedule that runs to the end against the other stages'
// dependencies (check_pipeline_schedules) runs to the end here. Each kind of transfer goes one
// way between two stages on a channel of its own (a communicator of those two stages), and
// both stages take a channel's transfers in the same order, so they match by order alone:
// NCCL's rule, which has no tags, and one no transfer can block across channels. Where the
// virtual stage before a chunk is the rank's own (the V's turn on the last stage), nothing
// moves between ranks: the model hands the activations and the gradient over in its slot.
//
// The data-parallel buckets hear of a chunk's gradients from its last backward or weight
// pass of the step, when every chunk before it in the flat gradient buffer (the later chunks)
// has finished (gradient_finishing_steps): otherwise they wait for the step's end.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "trainer/model/gpt_model.h"
#include "trainer/parallel/communicator.h"
#include "trainer/parallel/pipeline_schedule.h"

namespace kiln {

// Milliseconds of the step by phase, waits for the neighbours included.
struct PipelineTimes {
  double data_ms = 0;
  double fwd_ms = 0;
  double bwd_ms = 0;
  double wait_ms = 0;  // of fwd_ms and bwd_ms, in receives from the neighbouring stages
};

class PipelineExecutor {
 public:
  // pipeline: the stages of this rank's pipeline, in stage order (ParallelLayout), holding
  // their virtual stages as `placement` says. Opens the channels: collective over the pipeline.
  PipelineExecutor(GptModel& model, Communicator& pipeline, const PipelinePlacement& placement);

  // Puts micro-batch `micro` into activation slot `slot`, before its first forward here.
  using Load = std::function<void(int micro, int slot)>;
  // Hears the loss of each micro-batch's forward through the chunk with the head.
  using OnLoss = std::function<void(int micro, int slot, double loss)>;

  // Runs the schedule's steps in order, backwards from per-token losses weighted by dloss;
  // phase_end (when given) runs after each phase, so the host clock can time the device.
  // The passes that finish each chunk's gradients report them to gradients_ready
  // (GptModel::backward) when it is given, as above. Returns when every send of the step
  // has been received.
  PipelineTimes run(const PipelineSchedule& schedule, double dloss, const Load& load,
                    const OnLoss& on_loss, const std::function<void()>& phase_end = {},
                    const std::function<void(int64_t)>& gradients_ready = {});

 private:
  // A channel's key: the stages it joins, from and to, and whether it carries gradients
  // (from a stage to the one before it in the model) rather than activations.
  using Link = std::pair<std::pair<int, int>, bool>;
  // The channel at `chunk`'s input (else its output) for its activations or its gradients;
  // null where the virtual stage on that side is this rank's own or none.
  Communicator* channel(int chunk, bool input, bool gradient) const;

  GptModel& model_;
  PipelinePlacement placement_;
  int stage_ = 0;
  std::map<Link, std::unique_ptr<Communicator>> channels_;  // this stage's own
  std::vector<std::unique_ptr<PendingCollective>> sends_;
};

}  // namespace kiln
