// The start-up line that says how the Trainer splits the layers over pipeline stages.
#include <fmt/core.h>

#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/plan/rank_build.h"
#include "trainer/train/trainer.h"

namespace kiln {

void Trainer::print_pipeline() const {
  const int pp = layout_.pp(), vpp = layout_.vpp();
  const ParallelConfig& p = config_.parallel;
  std::string stages;
  const std::vector<PipelineChunk> all = virtual_stages(config_, layout_);
  for (size_t v = 0; v < all.size(); ++v) {
    const PipelineChunk& c = all[v];
    const std::string held =
        c.layers() == 1 ? fmt::format("layer {}", c.first_layer)
                        : fmt::format("layers {}-{}", c.first_layer, c.end_layer - 1);
    stages += fmt::format("{}{} {}: {}{}{}", v == 0 ? "" : ", ", vpp > 1 ? "virtual stage" : "stage",
                          v, held, c.embedding ? " + embedding" : "", c.head ? " + head" : "");
  }
  fmt::print(out_, "kiln: pipeline of {} stages{}, {} schedule over {} micro-batches: bubble "
                   "{:.1f}% of each step; {}{}\n",
             pp, vpp > 1 ? fmt::format(" x {} virtual", vpp) : std::string(),
             vpp > 1 ? "interleaved 1F1B" : "1F1B", accum_,
             100.0 * pipeline_bubble(pp, vpp, accum_), stages,
             vpp > 1 ? fmt::format(" (virtual stage v on stage v mod {})", pp) : std::string());
  if (p.first_stage_layers > 0 || p.last_stage_layers > 0)
    fmt::print(out_, "kiln: uneven pipeline split: parallel.first_stage_layers={}, "
                     "parallel.last_stage_layers={}\n",
               p.first_stage_layers, p.last_stage_layers);
}

}  // namespace kiln
