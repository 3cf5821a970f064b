// Runs one pipeline stage's part of a step (trainer/parallel/pipeline_schedule.h) on its
// model: a forward of a chunk without the embedding first receives its input activations
// from the stage before, and a chunk without the head sends its output to the stage after;
// a backward receives the gradient of its output from the stage after and sends the
// gradient of its input to the stage before.
//
// Sends are started and left to finish (each sends a copy) while receives wait, so a stage
// never waits on a neighbour that waits on it: every schedule that runs to the end against
// the other stages' dependencies (pipeline_schedule_test.cpp) runs to the end here. Each
// transfer is tagged with its kind, micro-batch and sending virtual stage, so a stage that
// receives activations and gradients from the same neighbour (interleaving) takes each
// where it belongs.
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
};

class PipelineExecutor {
 public:
  // pipeline: the stages of this rank's pipeline, in stage order (ParallelLayout).
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
  int tag(bool gradient, int micro, int virtual_stage) const;

  GptModel& model_;
  Communicator& pipeline_;
  int stage_, stages_;
  int previous_, next_;  // the neighbouring stages, round the ring of virtual stages
  std::vector<std::unique_ptr<PendingCollective>> sends_;
};

}  // namespace kiln
