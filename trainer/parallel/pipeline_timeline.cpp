#include "trainer/parallel/pipeline_timeline.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {

namespace {

// The finish times of one kind of pass, by (virtual stage, micro-batch); < 0 until it ran.
class Finished {
 public:
  Finished(int stages, int micro_batches)
      : micro_batches_(micro_batches), at_(static_cast<size_t>(stages * micro_batches), -1.0) {}
  double& operator()(int stage, int micro) { return at_[static_cast<size_t>(stage * micro_batches_ + micro)]; }

 private:
  int micro_batches_;
  std::vector<double> at_;
};

const char* pass_name(PipelinePass pass) {
  switch (pass) {
    case PipelinePass::Forward: return "forward";
    case PipelinePass::Backward: return "backward";
    case PipelinePass::InputGradient: return "input gradient";
    case PipelinePass::WeightGradient: return "weight gradient";
  }
  return "?";
}

std::string step_name(int rank, size_t index, const PipelineStep& step) {
  return fmt::format("rank {} step {} ({} of micro-batch {}, chunk {})", rank, index, pass_name(step.pass),
                     step.micro_batch, step.chunk);
}

// Every (virtual stage, micro-batch) runs each of its passes once, on its rank, each after the
// one before it in that rank's order; "" when so.
std::string check_passes(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& at, int micro_batches) {
  // Per (stage, micro): 1 forward, 2 backward whole, 4 input gradient, 8 weight gradient.
  std::vector<int> seen(static_cast<size_t>(at.stages() * micro_batches), 0);
  for (int r = 0; r < at.pp; ++r) {
    const std::vector<PipelineStep>& steps = ranks[static_cast<size_t>(r)].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      const PipelineStep& s = steps[i];
      if (s.micro_batch < 0 || s.micro_batch >= micro_batches || s.chunk < 0 || s.chunk >= at.chunks)
        return step_name(r, i, s) + " is outside the step";
      int& mine = seen[static_cast<size_t>(at.stage_of(r, s.chunk) * micro_batches + s.micro_batch)];
      const int bit = 1 << static_cast<int>(s.pass);
      const bool after_forward = s.pass == PipelinePass::Forward || (mine & 1);
      const bool after_input = s.pass != PipelinePass::WeightGradient || (mine & 4);
      if ((mine & bit) || !after_forward || !after_input) return step_name(r, i, s) + " is out of order or twice";
      mine |= bit;
    }
  }
  for (size_t k = 0; k < seen.size(); ++k)
    if (seen[k] != (1 | 2) && seen[k] != (1 | 4 | 8))
      return fmt::format("virtual stage {} of micro-batch {} does not run its forward and its backward once",
                         static_cast<int>(k) / micro_batches, static_cast<int>(k) % micro_batches);
  return "";
}

// The sends of one link as the sending rank makes them, or its receives as the receiving rank
// takes them: (micro-batch, virtual stage sent from) per (from, to, gradient?).
using Link = std::tuple<int, int, bool>;
using Transfers = std::map<Link, std::vector<std::pair<int, int>>>;

std::string check_links(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& at) {
  Transfers sent, received;
  const int last = at.stages() - 1;
  for (int r = 0; r < at.pp; ++r)
    for (const PipelineStep& s : ranks[static_cast<size_t>(r)].steps) {
      const int v = at.stage_of(r, s.chunk);
      if (s.pass == PipelinePass::Forward) {
        if (v > 0 && at.rank_of(v - 1) != r) received[{at.rank_of(v - 1), r, false}].push_back({s.micro_batch, v - 1});
        if (v < last && at.rank_of(v + 1) != r) sent[{r, at.rank_of(v + 1), false}].push_back({s.micro_batch, v});
      } else if (s.pass != PipelinePass::WeightGradient) {
        if (v < last && at.rank_of(v + 1) != r) received[{at.rank_of(v + 1), r, true}].push_back({s.micro_batch, v + 1});
        if (v > 0 && at.rank_of(v - 1) != r) sent[{r, at.rank_of(v - 1), true}].push_back({s.micro_batch, v});
      }
    }
  for (const auto& [link, order] : sent)
    if (received[link] != order)
      return fmt::format("rank {} sends its {} to rank {} in an order rank {} does not take them in",
                         std::get<0>(link), std::get<2>(link) ? "gradients" : "activations", std::get<1>(link),
                         std::get<1>(link));
  return "";
}

}  // namespace

double PipelineTimeline::bubble() const {
  if (busy.empty() || step <= 0) return 0;
  const double mean = std::accumulate(busy.begin(), busy.end(), 0.0) / static_cast<double>(busy.size());
  return 1 - mean / step;
}

PipelineTimeline play_pipeline(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& at,
                               int micro_batches, const PipelineCosts& costs, std::string* error) {
  KILN_CHECK(static_cast<int>(ranks.size()) == at.pp, "pipeline: a schedule per rank expected");
  const int V = at.stages(), last = V - 1;
  Finished forward(V, micro_batches), input(V, micro_batches);
  std::vector<size_t> next(ranks.size(), 0);
  PipelineTimeline t;
  t.busy.assign(ranks.size(), 0.0);
  t.starts.resize(ranks.size());
  std::vector<double> free_at(ranks.size(), 0.0);
  const double share = 1.0 / at.chunks;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < at.pp; ++r) {
      const std::vector<PipelineStep>& steps = ranks[static_cast<size_t>(r)].steps;
      for (size_t& i = next[static_cast<size_t>(r)]; i < steps.size(); ++i) {
        const PipelineStep& s = steps[i];
        const int v = at.stage_of(r, s.chunk), m = s.micro_batch;
        double ready = 0, cost = 0;
        if (s.pass == PipelinePass::Forward) {
          ready = v == 0 ? 0 : forward(v - 1, m);
          cost = costs.forward;
        } else if (s.pass == PipelinePass::WeightGradient) {
          ready = input(v, m);
          cost = costs.weight_gradient;
        } else {
          const double own = forward(v, m), after = v == last ? 0.0 : input(v + 1, m);
          ready = own < 0 || after < 0 ? -1.0 : std::max(own, after);
          cost = costs.input_gradient + (s.pass == PipelinePass::Backward ? costs.weight_gradient : 0);
        }
        if (ready < 0) break;  // waits for another rank
        const double start = std::max(ready, free_at[static_cast<size_t>(r)]), end = start + cost * share;
        free_at[static_cast<size_t>(r)] = end;
        t.starts[static_cast<size_t>(r)].push_back(start);
        t.busy[static_cast<size_t>(r)] += cost * share;
        t.step = std::max(t.step, end);
        if (s.pass == PipelinePass::Forward) forward(v, m) = end;
        else if (s.pass != PipelinePass::WeightGradient) input(v, m) = end;
        progress = true;
      }
    }
  }
  for (int r = 0; r < at.pp; ++r) {
    const size_t i = next[static_cast<size_t>(r)];
    const std::vector<PipelineStep>& steps = ranks[static_cast<size_t>(r)].steps;
    if (i < steps.size()) {
      if (error) *error = step_name(r, i, steps[i]) + " waits for a step that never runs";
      return {};
    }
  }
  return t;
}

void check_pipeline_schedules(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& at,
                              int micro_batches) {
  KILN_CHECK(static_cast<int>(ranks.size()) == at.pp,
             fmt::format("pipeline: {} schedules for {} ranks", ranks.size(), at.pp));
  std::string why = check_passes(ranks, at, micro_batches);
  if (why.empty()) play_pipeline(ranks, at, micro_batches, {}, &why);
  if (why.empty()) why = check_links(ranks, at);
  KILN_CHECK(why.empty(), "pipeline: the schedule cannot run: " + why);
}

double pipeline_bubble(int pp, int vpp, int micro_batches) {
  std::vector<PipelineSchedule> ranks;
  for (int r = 0; r < pp; ++r) ranks.push_back(pipeline_schedule(pp, vpp, r, micro_batches));
  return play_pipeline(ranks, {pp, vpp, false}, micro_batches).bubble();
}

}  // namespace kiln
