#include "trainer/parallel/zero_bubble_schedule.h"

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/config/pipeline_layers.h"

namespace kiln {

namespace {

// The slot the forward and the input gradient of each (virtual stage, micro-batch) ran in
// (what other passes wait for); -1 until it ran.
struct Slots {
  Slots(int stages, int micro_batches) : micro_batches(micro_batches) {
    const size_t n = static_cast<size_t>(stages * micro_batches);
    forward.assign(n, -1);
    input.assign(n, -1);
  }
  size_t at(int stage, int micro) const { return static_cast<size_t>(stage * micro_batches + micro); }
  int micro_batches;
  std::vector<int> forward, input;
};

}  // namespace

PipelinePlacement zero_bubble_placement(ZeroBubble kind, int pp) {
  return kind == ZeroBubble::H1 ? PipelinePlacement{pp, 1, false} : PipelinePlacement{pp, 2, true};
}

std::vector<PipelineSchedule> zero_bubble_schedules(ZeroBubble kind, int pp, int micro_batches) {
  const PipelinePlacement at = zero_bubble_placement(kind, pp);
  check_pipeline_sizes(pp, at.chunks, micro_batches);
  const int V = at.stages(), last = V - 1;
  Slots done(V, micro_batches);
  // Per virtual stage, the first micro-batch of each pass not yet run.
  struct Next {
    std::vector<int> forward, input, weight;
  } next{std::vector<int>(static_cast<size_t>(V), 0), std::vector<int>(static_cast<size_t>(V), 0),
         std::vector<int>(static_cast<size_t>(V), 0)};
  std::vector<PipelineSchedule> ranks(static_cast<size_t>(pp));
  std::vector<int> held(static_cast<size_t>(pp), 0);
  const auto limit = [&](int rank) { return kind == ZeroBubble::H1 ? pp - rank : 2 * pp; };
  // A pass that finished in an earlier slot (-1: not yet) is an input of this slot's.
  const auto before = [](int slot, int now) { return slot >= 0 && slot < now; };
  const int passes = 3 * V * micro_batches;
  int ran = 0;
  for (int now = 0; ran < passes; ++now) {
    KILN_CHECK(now <= passes, fmt::format("pipeline: no zero-bubble schedule for pp={}, {} micro-batches", pp,
                                          micro_batches));
    for (int r = 0; r < pp; ++r) {
      // The best pass of each kind this rank may run now: (stage, micro-batch), or none. A
      // stage takes each kind's micro-batches in order (so does the stage before and after
      // it), so its first not yet run is the one that may be ready.
      int b_stage = -1, b_micro = 0, f_stage = -1, f_micro = 0, w_stage = -1, w_micro = 0;
      for (int c = at.chunks - 1; c >= 0; --c) {
        const int v = at.stage_of(r, c);
        const int fm = next.forward[static_cast<size_t>(v)], bm = next.input[static_cast<size_t>(v)],
                  wm = next.weight[static_cast<size_t>(v)];
        const bool b_ready = bm < micro_batches && before(done.forward[done.at(v, bm)], now) &&
                             (v == last || before(done.input[done.at(v + 1, bm)], now));
        const bool f_ready = fm < micro_batches && (v == 0 || before(done.forward[done.at(v - 1, fm)], now));
        const bool w_ready = wm < micro_batches && before(done.input[done.at(v, wm)], now);
        // Deeper stages first: chunks are visited deepest first on every rank.
        if (b_ready && b_stage < 0) b_stage = v, b_micro = bm;
        if (f_ready && f_stage < 0) f_stage = v, f_micro = fm;
        if (w_ready && w_stage < 0) w_stage = v, w_micro = wm;
      }
      int& mine = held[static_cast<size_t>(r)];
      std::vector<PipelineStep>& steps = ranks[static_cast<size_t>(r)].steps;
      if (b_stage >= 0) {
        done.input[done.at(b_stage, b_micro)] = now;
        ++next.input[static_cast<size_t>(b_stage)];
        steps.push_back({PipelinePass::InputGradient, b_micro, at.chunk_of(b_stage)});
      } else if (f_stage >= 0 && mine < limit(r)) {
        done.forward[done.at(f_stage, f_micro)] = now;
        ++next.forward[static_cast<size_t>(f_stage)];
        ++mine;
        steps.push_back({PipelinePass::Forward, f_micro, at.chunk_of(f_stage)});
      } else if (w_stage >= 0) {
        ++next.weight[static_cast<size_t>(w_stage)];
        --mine;
        steps.push_back({PipelinePass::WeightGradient, w_micro, at.chunk_of(w_stage)});
      } else {
        continue;
      }
      ++ran;
    }
  }
  for (PipelineSchedule& s : ranks) {
    while (s.warmup < static_cast<int>(s.steps.size()) && s.steps[static_cast<size_t>(s.warmup)].forward())
      ++s.warmup;
  }
  return ranks;
}

}  // namespace kiln
