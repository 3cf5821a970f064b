#include "trainer/train/validation_sampler.h"

#include "trainer/train/generate.h"

namespace kiln {

// A validation step's samples are one store batch, which the store bounds.
static_assert(SamplePrompts::kMax <= store::kMaxSamplesPerStep);

ValidationSampler::ValidationSampler(const GptModel& model, const Tokenizer& tokenizer,
                                     const TrainConfig& train)
    : decoder_(model),
      tokenizer_(tokenizer),
      prompts_(train.sample_prompt),
      tokens_(train.sample_tokens),
      temperature_(train.sample_temperature),
      seed_(train.seed) {}

std::vector<store::Sample> ValidationSampler::samples(int64_t step) {
  std::vector<store::Sample> out;
  for (size_t slot = 0; slot < prompts_.texts.size(); ++slot) {
    store::Sample& s = out.emplace_back();
    s.step = step;
    s.slot = static_cast<int>(slot);
    s.prompt = prompts_.texts[slot];
    s.text = continuation(decoder_, tokenizer_, s.prompt, tokens_, temperature_, seed_);
    s.temperature = temperature_;
  }
  return out;
}

}  // namespace kiln
