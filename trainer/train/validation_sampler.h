// Text generated at each validation step for the run store, so a run's page shows what the
// model writes as it learns beside its loss: train.sample_tokens tokens after each of
// train.sample_prompt's prompts at train.sample_temperature, as the end-of-run sample draws them.
//
// Every sample draws with the run's seed, so the text changes from one step to the next
// because the model did, not the draw. The decoder (its key/value cache) is made with the
// sampler, before step 1, so evaluations allocate nothing. It needs the whole model on this
// rank: the trainer makes one only at tp = pp = 1, on the rank that records the run.
#pragma once

#include <cstdint>
#include <vector>

#include "store/types.h"
#include "trainer/config/config.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/gpt_decoder.h"
#include "trainer/model/gpt_model.h"

namespace kiln {

class ValidationSampler {
 public:
  ValidationSampler(const GptModel& model, const Tokenizer& tokenizer, const TrainConfig& train);

  // What the model writes now after each prompt, as the store keeps them for `step`.
  std::vector<store::Sample> samples(int64_t step);

 private:
  GptDecoder decoder_;
  const Tokenizer& tokenizer_;
  SamplePrompts prompts_;
  int tokens_;
  double temperature_;
  uint64_t seed_;
};

}  // namespace kiln
