#include "trainer/train/generate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "trainer/util/random.h"

namespace kiln {

std::string generate(GptModel& model, const Tokenizer& tokenizer, const std::string& prompt,
                     int n_tokens, double temperature, uint64_t seed) {
  std::vector<int32_t> context = tokenizer.encode(prompt);
  // An empty prompt starts the sample where a document would: after an end of document.
  if (context.empty()) context.push_back(tokenizer.eod());
  const size_t prompt_size = context.size();
  const size_t window = static_cast<size_t>(model.config().seq_len);
  Random rng(seed);
  std::vector<float> logits;
  std::vector<double> weights;
  for (int i = 0; i < n_tokens; ++i) {
    const size_t begin = context.size() > window ? context.size() - window : 0;
    const int64_t t = static_cast<int64_t>(context.size() - begin);
    model.set_batch(context.data() + begin, nullptr, 1, t);
    model.forward();
    model.logits_row(t - 1, logits);
    const float top = *std::max_element(logits.begin(), logits.end());
    weights.resize(logits.size());
    double total = 0;
    for (size_t v = 0; v < logits.size(); ++v) {
      weights[v] = std::exp((logits[v] - top) / temperature);
      total += weights[v];
    }
    double pick = rng.uniform() * total;
    size_t next = 0;
    while (next + 1 < weights.size() && pick >= weights[next]) pick -= weights[next++];
    context.push_back(static_cast<int32_t>(next));
  }
  const std::vector<int32_t> produced(context.begin() + static_cast<long>(prompt_size),
                                      context.end());
  return prompt + tokenizer.decode(produced);
}

}  // namespace kiln
