#include "trainer/train/validation_sampler.h"

#include "trainer/train/generate.h"

namespace kiln {

ValidationSampler::ValidationSampler(const GptModel& model, const Tokenizer& tokenizer,
                                     const TrainConfig& train)
    : decoder_(model),
      tokenizer_(tokenizer),
      prompt_(train.sample_prompt),
      tokens_(train.sample_tokens),
      temperature_(train.sample_temperature),
      seed_(train.seed) {}

store::Sample ValidationSampler::sample(int64_t step) {
  store::Sample s;
  s.step = step;
  s.prompt = prompt_;
  s.text = continuation(decoder_, tokenizer_, prompt_, tokens_, temperature_, seed_);
  s.temperature = temperature_;
  return s;
}

}  // namespace kiln
