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
// dependencies (pipeline_schedule_test.cpp) runs to the end here. Each kind of transfer goes
// one way over a link between two stages on a channel of its own (a communicator of those two
// stages), and both stages take a channel's transfers in the same order, so they match by
// order alone: NCCL's rule, which has no tags, and one no transfer can block across channels.
#pragma once

#include <functional>
#include <memory>
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
  // pipeline: the stages of this rank's pipeline, in stage order (ParallelLayout). Opens the
  // channels: collective over the pipeline.
  PipelineExecutor(GptModel& model, Communicator& pipeline);

  // Puts micro-batch `micro` into activation slot `slot`, before its first forward here.
  using Load = std::function<void(int micro, int slot)>;
  // Hears the loss of each micro-batch's forward through the chunk with the head.
  using OnLoss = std::function<void(int micro, int slot, double loss)>;

  // Runs the schedule's steps in order, backwards from per-token losses weighted by dloss;
  // phase_end (when given) runs after each phase, so the host clock can time the device.
  // The backwards of the step's last micro-batch, which finish each chunk's gradients,
  // report them to gradients_ready (GptModel::backward) when it is given. Returns when
  // every send of the step has been received.
  PipelineTimes run(const PipelineSchedule& schedule, double dloss, const Load& load,
                    const OnLoss& on_loss, const std::function<void()>& phase_end = {},
                    const std::function<void(int64_t)>& gradients_ready = {});

 private:
  GptModel& model_;
  // This stage's channels; null where no transfer goes (before the first stage and after the
  // last, unless interleaving goes round the ring of virtual stages).
  std::unique_ptr<Communicator> activations_to_next_, activations_from_previous_;
  std::unique_ptr<Communicator> gradients_to_previous_, gradients_from_next_;
  std::vector<std::unique_ptr<PendingCollective>> sends_;
};

}  // namespace kiln
