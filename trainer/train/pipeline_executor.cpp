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

PipelineExecutor::PipelineExecutor(GptModel& model, Communicator& pipeline, const PipelinePlacement& placement)
    : model_(model), placement_(placement), stage_(pipeline.rank()) {
  KILN_CHECK(placement.pp == pipeline.size() && (placement.pp == 1 || placement.chunks == model.chunks()),
             "pipeline: the placement does not match the pipeline group or the model's chunks");
  // Each boundary between two virtual stages on different ranks is a link; its activations
  // go up the model and its gradients back. Every stage makes every link's splits in the same
  // order (each is collective), joining those of its own links.
  std::vector<std::pair<int, int>> links;
  for (int v = 0; v + 1 < placement.stages(); ++v) {
    const std::pair<int, int> link{placement.rank_of(v), placement.rank_of(v + 1)};
    if (link.first != link.second && std::find(links.begin(), links.end(), link) == links.end())
      links.push_back(link);
  }
  for (const std::pair<int, int>& link : links) {
    const bool joins = stage_ == link.first || stage_ == link.second;
    const std::vector<int> group = joins ? std::vector<int>{link.first, link.second} : std::vector<int>{stage_};
    for (const bool gradient : {false, true}) {
      std::unique_ptr<Communicator> channel = pipeline.split(group);
      if (joins) channels_[{link, gradient}] = std::move(channel);
    }
  }
}

Communicator* PipelineExecutor::channel(int chunk, bool input, bool gradient) const {
  const int v = placement_.stage_of(stage_, chunk), neighbour = input ? v - 1 : v + 1;
  if (neighbour < 0 || neighbour >= placement_.stages() || placement_.rank_of(neighbour) == stage_) return nullptr;
  const int lower = placement_.rank_of(std::min(v, neighbour)), upper = placement_.rank_of(std::max(v, neighbour));
  return channels_.at({{lower, upper}, gradient}).get();
}

PipelineTimes PipelineExecutor::run(const PipelineSchedule& schedule, double dloss, const Load& load,
                                    const OnLoss& on_loss, const std::function<void()>& phase_end,
                                    const std::function<void(int64_t)>& gradients_ready) {
  PipelineTimes times;
  const std::vector<bool> reports = gradient_finishing_steps(schedule, model_.chunks());
  const auto end_phase = [&](double& ms, Clock::time_point start) {
    if (phase_end) phase_end();
    ms += ms_since(start);
  };
  const auto receive = [&](Communicator* from, const Tensor& into) {
    const Clock::time_point wait = Clock::now();
    from->recv(into, peer(*from), 0);
    times.wait_ms += ms_since(wait);
  };
  Ops& ops = model_.ops();
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const PipelineStep& step = schedule.steps[i];
    const int micro = step.micro_batch, slot = micro % model_.slots(), c = step.chunk;
    const PipelineChunk& chunk = model_.chunk(c);
    const std::function<void(int64_t)> ready = reports[i] ? gradients_ready : nullptr;
    // The chunk after this one in the model, when it is this rank's own (the V's turn).
    const bool hands_on = c + 1 < model_.chunks() && model_.follows_own_chunk(c + 1);
    if (step.pass == PipelinePass::WeightGradient) {
      // The weights' gradients of a backward whose input gradient ran earlier: local, no
      // transfer.
      const Clock::time_point start = Clock::now();
      model_.backward_weights(slot, c, ready);
      end_phase(times.bwd_ms, start);
    } else if (step.forward()) {
      if (c == 0) {
        const Clock::time_point start = Clock::now();
        load(micro, slot);
        model_.begin_micro_batch(slot, micro);
        end_phase(times.data_ms, start);
      }
      const Clock::time_point start = Clock::now();
      if (model_.follows_own_chunk(c)) ops.cast(model_.chunk_input(slot, c), model_.chunk_output(slot, c - 1));
      else if (!chunk.embedding) receive(channel(c, true, false), model_.chunk_input(slot, c));
      const double loss = model_.forward(slot, c);
      if (chunk.head) {
        on_loss(micro, slot, loss);
      } else if (!hands_on) {
        Communicator& to = *channel(c, false, false);
        sends_.push_back(to.start_send(model_.chunk_output(slot, c), peer(to), 0));
      }
      end_phase(times.fwd_ms, start);
    } else {
      const Clock::time_point start = Clock::now();
      if (hands_on) ops.cast(model_.residual_gradient(slot), model_.handed_gradient(slot));
      else if (!chunk.head) receive(channel(c, false, true), model_.residual_gradient(slot));
      if (step.pass == PipelinePass::InputGradient) model_.backward_input(dloss, slot, c);
      else model_.backward(dloss, slot, ready, c);
      if (model_.follows_own_chunk(c)) {
        ops.cast(model_.handed_gradient(slot), model_.residual_gradient(slot));
      } else if (!chunk.embedding) {
        Communicator& to = *channel(c, true, true);
        sends_.push_back(to.start_send(model_.residual_gradient(slot), peer(to), 0));
      }
      end_phase(times.bwd_ms, start);
    }
  }
  for (const std::unique_ptr<PendingCollective>& send : sends_) send->wait();
  sends_.clear();
  return times;
}

}  // namespace kiln
