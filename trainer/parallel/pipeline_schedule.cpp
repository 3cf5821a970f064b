#include "trainer/parallel/pipeline_schedule.h"

#include <algorithm>

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/config/pipeline_layers.h"

namespace kiln {

PipelineSchedule pipeline_schedule(int pp, int vpp, int stage, int micro_batches) {
  check_pipeline_sizes(pp, vpp, micro_batches);
  KILN_CHECK(stage >= 0 && stage < pp,
             fmt::format("pipeline: stage {} is outside [0, pp={})", stage, pp));
  if (vpp > 1 && micro_batches % pp != 0)
    fail(fmt::format("pipeline: the interleaved schedule (parallel.vpp={}) needs the "
                     "micro-batches of a step ({}) to be a multiple of parallel.pp={}",
                     vpp, micro_batches, pp));
  // Units are (micro-batch, chunk) pairs; without interleaving a unit is a micro-batch.
  const int units = micro_batches * vpp;
  PipelineSchedule schedule;
  if (vpp == 1) {
    schedule.warmup = std::min(pp - stage - 1, micro_batches);
  } else if (micro_batches == pp) {
    schedule.warmup = units;  // too few micro-batches for a steady state: all forwards first
  } else {
    schedule.warmup = std::min((pp - stage - 1) * 2 + (vpp - 1) * pp, units);
  }
  // Unit k: groups of pp micro-batches go through chunk 0, then chunk 1, ...; backwards take
  // the chunks in reverse.
  const auto unit = [&](int k, bool forward) {
    const int in_group = k % (pp * vpp);
    const int chunk = in_group / pp;
    return PipelineStep{forward ? PipelinePass::Forward : PipelinePass::Backward, k / (pp * vpp) * pp + k % pp,
                        forward ? chunk : vpp - 1 - chunk};
  };
  int forwards = 0, backwards = 0;
  for (; forwards < schedule.warmup; ++forwards) schedule.steps.push_back(unit(forwards, true));
  while (forwards < units) {
    schedule.steps.push_back(unit(forwards++, true));
    schedule.steps.push_back(unit(backwards++, false));
  }
  while (backwards < units) schedule.steps.push_back(unit(backwards++, false));
  return schedule;
}

int pipeline_slots(const PipelineSchedule& schedule, int chunk) {
  // A micro-batch is in flight from its first step until its last.
  std::vector<PipelineStep> steps;
  for (const PipelineStep& step : schedule.steps)
    if (chunk < 0 || step.chunk == chunk) steps.push_back(step);
  std::vector<size_t> last;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto micro = static_cast<size_t>(steps[i].micro_batch);
    if (last.size() <= micro) last.resize(micro + 1, 0);
    last[micro] = i;
  }
  int oldest = 0, newest = -1, widest = 1;
  for (size_t i = 0; i < steps.size(); ++i) {
    newest = std::max(newest, steps[i].micro_batch);
    widest = std::max(widest, newest - oldest + 1);
    while (oldest <= newest && last[static_cast<size_t>(oldest)] <= i) ++oldest;
  }
  return widest;
}

int most_chunks_held(const PipelineSchedule& schedule) {
  int held = 0, most = 0;
  for (const PipelineStep& step : schedule.steps) {
    if (step.pass == PipelinePass::Forward) most = std::max(most, ++held);
    if (step.pass == PipelinePass::WeightGradient || step.pass == PipelinePass::Backward) --held;
  }
  return most;
}

std::vector<bool> gradient_finishing_steps(const PipelineSchedule& schedule, int chunks) {
  const size_t none = schedule.steps.size();
  std::vector<size_t> last(static_cast<size_t>(chunks), none);
  for (size_t i = 0; i < schedule.steps.size(); ++i)
    if (!schedule.steps[i].forward()) last[static_cast<size_t>(schedule.steps[i].chunk)] = i;
  std::vector<bool> finishing(schedule.steps.size(), false);
  for (size_t c = 0; c < last.size(); ++c) {
    bool later_done = last[c] != none;
    for (size_t later = c + 1; later < last.size(); ++later) later_done = later_done && last[later] < last[c];
    if (later_done) finishing[last[c]] = true;
  }
  return finishing;
}

PipelineSchedule pipeline_forwards(int vpp, int micro_batches) {
  check_pipeline_sizes(1, vpp, micro_batches);
  PipelineSchedule schedule;
  for (int m = 0; m < micro_batches; ++m)
    for (int c = 0; c < vpp; ++c) schedule.steps.push_back({PipelinePass::Forward, m, c});
  schedule.warmup = static_cast<int>(schedule.steps.size());
  return schedule;
}

}  // namespace kiln
