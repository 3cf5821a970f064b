#include "cli/inference_model.h"

#include <CLI/CLI.hpp>

#include <fmt/core.h>

#include <filesystem>

#include "base/check.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/train/backend.h"

namespace kiln {

namespace fs = std::filesystem;

void add_checkpoint_option(CLI::App* command, std::string& checkpoint) {
  command
      ->add_option("--checkpoint", checkpoint,
                   "A checkpoint folder, a run's folder of checkpoints, or latest")
      ->required();
}

std::string checkpoint_argument(const std::string& spec) {
  if (spec != "latest") {
    if (!fs::exists(spec)) fail("--checkpoint " + spec + ": no such folder");
    if (!fs::exists(fs::path(spec) / "manifest.json") && !fs::exists(fs::path(spec) / "latest"))
      fail("--checkpoint " + spec +
           " is not a checkpoint (no manifest.json) nor a folder of checkpoints (no latest file)");
  }
  return find_checkpoint(spec, TrainConfig{}.checkpoint_dir);
}

InferenceModel load_inference_model(const std::string& checkpoint, const std::string& device,
                                    const std::string& tokenizer, int64_t micro_batch) {
  InferenceModel m;
  m.path = checkpoint_argument(checkpoint);
  const Checkpoint saved(m.path);
  m.config = config_from_json(saved.state().config);
  // The backend is picked as for training, in fp32; a GPU then takes the run's precision.
  const std::string precision = m.config.precision.dtype;
  m.config.backend.device = device;
  m.config.precision.dtype = "fp32";
  m.ops = make_ops(m.config, 0);
  DType dtype = DType::F32;
  if (m.ops->device() == Device::Cuda) {
    m.config.precision.dtype = precision;
    if (precision == "bf16") dtype = DType::BF16;
    if (precision == "fp16") dtype = DType::F16;
  }

  const std::string spec = tokenizer.empty() ? m.config.data.tokenizer : tokenizer;
  m.tokenizer = load_tokenizer(spec);
  if (m.tokenizer->vocab_size() > m.config.model.vocab_size)
    fail(
        fmt::format("tokenizer {} has {} ids, more than the {} of the model in {} "
                    "(model.vocab_size)",
                    spec, m.tokenizer->vocab_size(), m.config.model.vocab_size, m.path));
  m.model = std::make_unique<GptModel>(m.config.model, micro_batch, *m.ops, dtype);
  saved.load_parameters(*m.model, *m.ops);
  return m;
}

}  // namespace kiln
