// Sampling text from a trained model: the prompt, then n tokens drawn one at a time
// from the softmax of the last position's logits at a temperature. The context slides
// when it outgrows model.seq_len.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/data/tokenizer.h"
#include "trainer/model/gpt_model.h"

namespace kiln {

std::string generate(GptModel& model, const Tokenizer& tokenizer, const std::string& prompt,
                     int n_tokens, double temperature, uint64_t seed);

}  // namespace kiln
