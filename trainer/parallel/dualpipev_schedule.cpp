#include "trainer/parallel/dualpipev_schedule.h"

#include <fmt/core.h>

#include <deque>

#include "base/check.h"

namespace kiln {

namespace {

// One rank's program as it is written down: each chunk's next micro-batch for a forward and
// for a backward, and the input gradients whose weight gradients wait, oldest first.
class Program {
 public:
  void forward(int chunk) { add(PipelinePass::Forward, forwarded_[chunk]++, chunk); }
  // The backward whole, or its input gradient alone (the weights' waiting).
  void backward(int chunk, bool split) {
    const int micro = backwarded_[chunk]++;
    add(split ? PipelinePass::InputGradient : PipelinePass::Backward, micro, chunk);
    if (split) waiting_.push_back({PipelinePass::WeightGradient, micro, chunk});
  }
  void weight() {
    KILN_CHECK(!waiting_.empty(), "dualpipev: a weight gradient with no input gradient before it");
    schedule_.steps.push_back(waiting_.front());
    waiting_.pop_front();
  }
  PipelineSchedule done() {
    KILN_CHECK(waiting_.empty(), "dualpipev: weight gradients left at the end of the step");
    while (schedule_.warmup < static_cast<int>(schedule_.steps.size()) &&
           schedule_.steps[static_cast<size_t>(schedule_.warmup)].forward())
      ++schedule_.warmup;
    return schedule_;
  }

 private:
  void add(PipelinePass pass, int micro, int chunk) { schedule_.steps.push_back({pass, micro, chunk}); }
  int forwarded_[2] = {0, 0};
  int backwarded_[2] = {0, 0};
  std::deque<PipelineStep> waiting_;
  PipelineSchedule schedule_;
};

PipelineSchedule rank_program(int pp, int s, int m) {
  Program p;
  const int after = pp - s - 1;  // ranks after this one
  for (int i = 0; i < 2 * after; ++i) p.forward(0);
  for (int i = 0; i <= s; ++i) {
    p.forward(0);
    p.forward(1);
  }
  for (int i = 0; i < after; ++i) {
    p.backward(1, true);
    p.weight();
    p.forward(1);
  }
  for (int i = 0; i < m - 2 * pp + s + 1; ++i) {
    p.forward(0);
    p.backward(1, false);
    p.forward(1);
    p.backward(0, false);
  }
  for (int i = 0; i < after; ++i) {
    p.backward(1, false);
    p.forward(1);
    p.backward(0, false);
  }
  // From the middle of these on, the backwards leave their weights' gradients for the
  // cool-down's gaps: an odd rank's from its chunk 1, an even one's from its chunk 0.
  bool split = false;
  for (int i = 0; i <= s; ++i) {
    if (i == (s + 1) / 2 && s % 2 == 1) split = true;
    p.backward(1, split);
    if (i == (s + 1) / 2 && s % 2 == 0) split = true;
    p.backward(0, split);
  }
  for (int i = 0; i < after; ++i) {
    p.weight();
    p.backward(0, true);
  }
  for (int i = 0; i <= s; ++i) p.weight();
  return p.done();
}

}  // namespace

std::vector<PipelineSchedule> dualpipev_schedules(int pp, int micro_batches) {
  KILN_CHECK(pp >= 2 && micro_batches >= 2 * pp,
             fmt::format("pipeline: dualpipev needs pp >= 2 and at least 2 pp micro-batches (here pp={}, {} "
                         "micro-batches); use more micro-batches (train.global_batch) or zbv",
                         pp, micro_batches));
  std::vector<PipelineSchedule> ranks;
  for (int s = 0; s < pp; ++s) ranks.push_back(rank_program(pp, s, micro_batches));
  return ranks;
}

}  // namespace kiln
