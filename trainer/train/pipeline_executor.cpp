#include "trainer/train/pipeline_executor.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"
#include "trainer/util/step_clock.h"

namespace kiln {

namespace {

// A channel joins two stages: its other end.
int peer(const Communicator& channel) { return 1 - channel.rank(); }

}  // namespace

PipelineExecutor::PipelineExecutor(GptModel& model, Communicator& pipeline)
    : model_(model) {
  const int stage = pipeline.rank(), stages = pipeline.size();
  // Link i joins stage i to the next; activations go along it and gradients back. The link
  // from the last stage to the first carries the chunks' hand-over under interleaving only.
  // Every stage makes every split (each is collective), joining those of its own links.
  const int links = model_.chunks() > 1 ? stages : stages - 1;
  for (int link = 0; link < links; ++link) {
    const int from = link, to = (link + 1) % stages;
    const bool joins = stage == from || stage == to;
    const std::vector<int> group = joins ? std::vector<int>{from, to} : std::vector<int>{stage};
    std::unique_ptr<Communicator> activations = pipeline.split(group);
    std::unique_ptr<Communicator> gradients = pipeline.split(group);
    if (stage == from) {
      activations_to_next_ = std::move(activations);
      gradients_from_next_ = std::move(gradients);
    } else if (stage == to) {
      activations_from_previous_ = std::move(activations);
      gradients_to_previous_ = std::move(gradients);
    }
  }
}

PipelineTimes PipelineExecutor::run(const PipelineSchedule& schedule, double dloss,
                                    const Load& load, const OnLoss& on_loss,
                                    const std::function<void()>& phase_end,
                                    const std::function<void(int64_t)>& gradients_ready) {
  PipelineTimes times;
  int last_micro = 0;
  for (const PipelineStep& step : schedule.steps) last_micro = std::max(last_micro, step.micro_batch);
  const auto end_phase = [&](double& ms, Clock::time_point start) {
    if (phase_end) phase_end();
    ms += ms_since(start);
  };
  for (const PipelineStep& step : schedule.steps) {
    const int micro = step.micro_batch, slot = micro % model_.slots();
    const PipelineChunk& chunk = model_.chunk(step.chunk);
    if (step.pass == PipelinePass::WeightGradient) {
      // The weights' gradients of a backward whose input gradient ran earlier: local, no
      // transfer. The last micro-batch's finish the step's gradients (its input gradient
      // finished the norms' and the experts' before), so the buckets follow it.
      const Clock::time_point start = Clock::now();
      model_.backward_weights(slot, step.chunk, micro == last_micro ? gradients_ready : nullptr);
      end_phase(times.bwd_ms, start);
    } else if (step.forward()) {
      if (step.chunk == 0) {
        const Clock::time_point start = Clock::now();
        load(micro, slot);
        end_phase(times.data_ms, start);
      }
      const Clock::time_point start = Clock::now();
      if (!chunk.embedding) {
        const Clock::time_point wait = Clock::now();
        activations_from_previous_->recv(model_.chunk_input(slot, step.chunk), peer(*activations_from_previous_), 0);
        times.wait_ms += ms_since(wait);
      }
      const double loss = model_.forward(slot, step.chunk);
      if (chunk.head) {
        on_loss(micro, slot, loss);
      } else {
        sends_.push_back(activations_to_next_->start_send(model_.chunk_output(slot, step.chunk),
                                                          peer(*activations_to_next_), 0));
      }
      end_phase(times.fwd_ms, start);
    } else {
      const Clock::time_point start = Clock::now();
      if (!chunk.head) {
        const Clock::time_point wait = Clock::now();
        gradients_from_next_->recv(model_.residual_gradient(slot), peer(*gradients_from_next_), 0);
        times.wait_ms += ms_since(wait);
      }
      // A chunk's backwards take the micro-batches in order, and the last micro-batch goes
      // through the chunks last to first, as the flat gradient buffer holds them.
      if (step.pass == PipelinePass::InputGradient) model_.backward_input(dloss, slot, step.chunk);
      else model_.backward(dloss, slot, micro == last_micro ? gradients_ready : nullptr, step.chunk);
      if (!chunk.embedding)
        sends_.push_back(gradients_to_previous_->start_send(model_.residual_gradient(slot),
                                                            peer(*gradients_to_previous_), 0));
      end_phase(times.bwd_ms, start);
    }
  }
  for (const std::unique_ptr<PendingCollective>& send : sends_) send->wait();
  sends_.clear();
  return times;
}

}  // namespace kiln
