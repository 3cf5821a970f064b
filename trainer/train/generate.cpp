#include "trainer/train/generate.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

std::vector<int32_t> generate_ids(GptDecoder& decoder, std::span<const int32_t> prompt,
                                  const GenerateOptions& options,
                                  const std::function<void(int32_t)>& on_token) {
  KILN_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  const auto window = static_cast<size_t>(decoder.capacity());
  const size_t keep = std::max<size_t>(1, window / 2);
  // The tokens the decoder holds, in order: what each next token is conditioned on.
  std::vector<int32_t> held(prompt.end() - static_cast<long>(std::min(prompt.size(), window)),
                            prompt.end());
  decoder.reset();
  decoder.feed(held.data(), static_cast<int64_t>(held.size()));

  Sampler sampler(options.sampling, options.seed);
  std::vector<int32_t> produced;
  std::vector<float> logits;
  for (int i = 0; i < options.max_tokens; ++i) {
    decoder.logits(0, logits);
    const int32_t next = sampler.next(logits);
    if (next == options.stop_id) break;
    produced.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 == options.max_tokens) break;  // the last token needs no forward
    if (held.size() == window) {
      held.erase(held.begin(), held.end() - static_cast<long>(keep - 1));
      held.push_back(next);
      decoder.reset();
      decoder.feed(held.data(), static_cast<int64_t>(held.size()));
    } else {
      held.push_back(next);
      decoder.feed(&next, 1);
    }
  }
  return produced;
}

std::vector<int32_t> prompt_ids(const Tokenizer& tokenizer, const std::string& prompt) {
  // The prompt is the user's own (not data), so its special tokens are control tokens: a chat
  // prompt's <|im_start|> is the token the model was fine-tuned on.
  // A tokenizer that adds its begin-of-document token starts the prompt with it, as Hugging
  // Face's tokenizer(prompt) does; an empty prompt starts from that token, or the end of one.
  std::vector<int32_t> ids;
  if (tokenizer.adds_bos()) ids.push_back(tokenizer.bos());
  tokenizer.encode(prompt, ids, /*allow_special=*/true);
  if (ids.empty()) ids.push_back(tokenizer.bos() >= 0 ? tokenizer.bos() : tokenizer.eod());
  return ids;
}

std::string continuation(GptDecoder& decoder, const Tokenizer& tokenizer, const std::string& prompt,
                         int n_tokens, double temperature, uint64_t seed) {
  GenerateOptions options;
  options.max_tokens = n_tokens;
  options.sampling.temperature = temperature;
  options.seed = seed;
  options.stop_id = tokenizer.eod();
  return tokenizer.decode(generate_ids(decoder, prompt_ids(tokenizer, prompt), options));
}

std::string generate(const GptModel& model, const Tokenizer& tokenizer, const std::string& prompt,
                     int n_tokens, double temperature, uint64_t seed) {
  GptDecoder decoder(model);
  return prompt + continuation(decoder, tokenizer, prompt, n_tokens, temperature, seed);
}

}  // namespace kiln
