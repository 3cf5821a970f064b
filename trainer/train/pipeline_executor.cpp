#include "trainer/train/pipeline_executor.h"

#include <algorithm>
#include <chrono>

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// MPI guarantees tags up to 32767; transfers in flight between two stages at once are far
// fewer than the span, so tags taken modulo it never meet.
constexpr int kTagSpan = 32768;

}  // namespace

PipelineExecutor::PipelineExecutor(GptModel& model, Communicator& pipeline)
    : model_(model),
      pipeline_(pipeline),
      stage_(pipeline.rank()),
      stages_(pipeline.size()),
      previous_((pipeline.rank() + pipeline.size() - 1) % pipeline.size()),
      next_((pipeline.rank() + 1) % pipeline.size()) {}

int PipelineExecutor::tag(bool gradient, int micro, int virtual_stage) const {
  const int64_t unit = int64_t{micro} * stages_ * model_.chunks() + virtual_stage;
  return static_cast<int>((unit * 2 + (gradient ? 1 : 0)) % kTagSpan);
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
    // Virtual stage: chunk c of stage s is c * pp + s in model order.
    const int v = step.chunk * stages_ + stage_;
    if (step.forward) {
      if (step.chunk == 0) {
        const Clock::time_point start = Clock::now();
        load(micro, slot);
        end_phase(times.data_ms, start);
      }
      const Clock::time_point start = Clock::now();
      if (!chunk.embedding)
        pipeline_.recv(model_.chunk_input(slot, step.chunk), previous_, tag(false, micro, v - 1));
      const double loss = model_.forward(slot, step.chunk);
      if (chunk.head) {
        on_loss(micro, slot, loss);
      } else {
        sends_.push_back(
            pipeline_.start_send(model_.chunk_output(slot, step.chunk), next_, tag(false, micro, v)));
      }
      end_phase(times.fwd_ms, start);
    } else {
      const Clock::time_point start = Clock::now();
      if (!chunk.head)
        pipeline_.recv(model_.residual_gradient(slot), next_, tag(true, micro, v + 1));
      // A chunk's backwards take the micro-batches in order, and the last micro-batch goes
      // through the chunks last to first, as the flat gradient buffer holds them.
      model_.backward(dloss, slot, micro == last_micro ? gradients_ready : nullptr, step.chunk);
      if (!chunk.embedding)
        sends_.push_back(
            pipeline_.start_send(model_.residual_gradient(slot), previous_, tag(true, micro, v)));
      end_phase(times.bwd_ms, start);
    }
  }
  for (const std::unique_ptr<PendingCollective>& send : sends_) send->wait();
  sends_.clear();
  return times;
}

}  // namespace kiln
