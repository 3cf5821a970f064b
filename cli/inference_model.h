// A checkpoint opened for inference by `kiln generate` and `kiln eval`: its config, the
// ops for --device, the model with the checkpoint's weights, and a tokenizer that fits the
// model's vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "trainer/config/config.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/gpt_model.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kiln {

// What --checkpoint names, as --resume takes it: a checkpoint folder, a run's folder of
// checkpoints (its latest) or `latest`; one line saying what is wrong otherwise.
std::string checkpoint_argument(const std::string& spec);
// The required --checkpoint option that checkpoint_argument reads.
void add_checkpoint_option(CLI::App* command, std::string& checkpoint);

struct InferenceModel {
  std::string path;  // the checkpoint folder
  Config config;     // the checkpoint's
  std::unique_ptr<Ops> ops;
  std::unique_ptr<GptModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// device: cpu | cuda | auto. The CPU computes in fp32; a GPU in the checkpoint's
// precision.dtype. tokenizer: a spec, or empty for the checkpoint's data.tokenizer.
InferenceModel load_inference_model(const std::string& checkpoint, const std::string& device,
                                    const std::string& tokenizer, int64_t micro_batch);

}  // namespace kiln
