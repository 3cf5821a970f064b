// How the Trainer splits the layers over pipeline stages, and the start-up line saying so.
#include <fmt/core.h>

#include "trainer/parallel/pipeline_schedule.h"
#include "trainer/train/trainer.h"

namespace kiln {

std::vector<PipelineChunk> Trainer::virtual_stages() const {
  const int pp = layout_.pp(), vpp = layout_.vpp(), stages = pp * vpp;
  const ParallelConfig& p = config_.parallel;
  const std::vector<int> layers =
      pipeline_layers(config_.model.n_layer, pp, vpp, p.first_stage_layers, p.last_stage_layers);
  std::vector<PipelineChunk> chunks;
  int first_layer = 0;
  for (int v = 0; v < stages; ++v) {
    const int n = layers[static_cast<size_t>(v)];
    chunks.push_back({first_layer, first_layer + n, v == 0, v == stages - 1});
    first_layer += n;
  }
  return chunks;
}

std::vector<PipelineChunk> Trainer::stage_chunks() const {
  const int pp = layout_.pp();
  if (pp == 1) return {};
  // Virtual stage v is chunk v / pp of stage v mod pp.
  std::vector<PipelineChunk> chunks;
  const std::vector<PipelineChunk> all = virtual_stages();
  for (size_t v = 0; v < all.size(); ++v)
    if (static_cast<int>(v) % pp == coordinates_.pp) chunks.push_back(all[v]);
  return chunks;
}

void Trainer::print_pipeline() const {
  const int pp = layout_.pp(), vpp = layout_.vpp();
  const ParallelConfig& p = config_.parallel;
  std::string stages;
  const std::vector<PipelineChunk> all = virtual_stages();
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
