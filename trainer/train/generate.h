// Generating text from a trained model with a key/value cache (trainer/model/gpt_decoder.h):
// the prompt is fed once, then each new token alone, so a token costs one position's work.
//
// When the context (model.seq_len positions) is full, the decoder slides: it keeps the last
// half window of tokens (the newest included), feeds them again from position 0, and goes
// on. The slide costs one half-window prefill every seq_len / 2 tokens, so the work per token
// stays linear; each token after a slide sees between seq_len / 2 and seq_len tokens before
// it. A prompt longer than the context keeps its last seq_len tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "trainer/data/tokenizer.h"
#include "trainer/model/gpt_decoder.h"
#include "trainer/train/sampler.h"

namespace kiln {

struct GenerateOptions {
  int max_tokens = 0;
  SamplingOptions sampling;
  uint64_t seed = 0;
  int32_t stop_id = -1;  // generation ends, without it, when this id is drawn; -1: never
};

// Generates up to max_tokens after prompt (at least one id) on a decoder of batch 1,
// calling on_token(id) as each is drawn; returns the ids drawn (the stop id left out).
std::vector<int32_t> generate_ids(GptDecoder& decoder, std::span<const int32_t> prompt,
                                  const GenerateOptions& options,
                                  const std::function<void(int32_t)>& on_token = {});

// The ids a prompt starts from: its tokens, or the end-of-document id alone for an empty
// prompt, so the sample starts where a document would.
std::vector<int32_t> prompt_ids(const Tokenizer& tokenizer, const std::string& prompt);

// The text of up to n_tokens tokens drawn after the prompt at `temperature` (no top-k or
// top-p), ending early at the end-of-document id; the prompt is not repeated.
std::string continuation(GptDecoder& decoder, const Tokenizer& tokenizer, const std::string& prompt,
                         int n_tokens, double temperature, uint64_t seed);

// The trainer's end-of-run sample: the prompt and its continuation.
std::string generate(const GptModel& model, const Tokenizer& tokenizer, const std::string& prompt,
                     int n_tokens, double temperature, uint64_t seed);

}  // namespace kiln
