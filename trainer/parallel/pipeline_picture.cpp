#include "trainer/parallel/pipeline_picture.h"

#include <fmt/core.h>

#include <cctype>
#include <cmath>

#include "base/check.h"
#include "trainer/parallel/pipeline_timeline.h"

namespace kiln {

namespace {

char pass_letter(PipelinePass pass) {
  switch (pass) {
    case PipelinePass::Forward: return 'F';
    case PipelinePass::Backward: return 'B';
    case PipelinePass::InputGradient: return 'I';
    case PipelinePass::WeightGradient: return 'W';
  }
  return '?';
}

// A step's cell, `width` characters wide.
std::string cell(const PipelineStep& step, int chunks, size_t width) {
  const char letter = pass_letter(step.pass);
  const std::string text = fmt::format("{}{}{}", step.chunk == 0 ? letter : static_cast<char>(std::tolower(letter)),
                                       step.micro_batch, chunks > 2 ? fmt::format(":{}", step.chunk) : "");
  return fmt::format("{:<{}}", text, width);
}

}  // namespace

std::string draw_pipeline(const std::vector<PipelineSchedule>& ranks, const PipelinePlacement& placement,
                          int micro_batches) {
  check_pipeline_schedules(ranks, placement, micro_batches);
  const PipelineTimeline t = play_pipeline(ranks, placement, micro_batches);
  // A chunk's pass takes 1 / chunks of the whole stage's: that is the unit.
  const double unit = 1.0 / placement.chunks;
  const auto units = [&](double time) { return static_cast<size_t>(std::lround(time / unit)); };
  // The letter, the micro-batch and (beyond two chunks) ":" and the chunk, at their widest.
  const size_t width = 1 + std::to_string(micro_batches - 1).size() +
                       (placement.chunks > 2 ? 1 + std::to_string(placement.chunks - 1).size() : 0);
  const std::string idle(width, '.');
  std::string out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::vector<std::string> cells(units(t.step), idle);
    const std::vector<PipelineStep>& steps = ranks[r].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      const size_t first = units(t.starts[r][i]), n = steps[i].pass == PipelinePass::Backward ? 2 : 1;
      for (size_t k = first; k < first + n; ++k) cells[k] = cell(steps[i], placement.chunks, width);
    }
    out += fmt::format("rank {} |", r);
    for (const std::string& c : cells) out += " " + c;
    out += "\n";
  }
  out += "F forward, B backward (two units), I input gradient, W weight gradient; lower case: a rank's later "
         "chunk; . idle\n";
  out += fmt::format("bubble {:.1f}% of the step ({} units)\n", 100.0 * t.bubble(), units(t.step));
  return out;
}

}  // namespace kiln
