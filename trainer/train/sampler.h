// Picking the next token from a position's logits: greedy, or a seeded draw from the
// softmax at a temperature, cut to the k most likely tokens (top-k) and then to the
// smallest set of most likely tokens whose probability reaches p (top-p, nucleus), in that
// order, as Hugging Face's generate() applies them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/util/random.h"

namespace kiln {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy, the most likely token (the lowest id among ties)
  int top_k = 0;             // 0: no cut
  double top_p = 1.0;        // 1: no cut
};

// Throws kiln::Error naming the option when temperature < 0, top_k < 0 or top_p is
// outside (0, 1].
void check_sampling(const SamplingOptions& options);

struct Candidate {
  int32_t id = 0;
  double probability = 0;
};

class Sampler {
 public:
  Sampler(const SamplingOptions& options, uint64_t seed);

  // The tokens a draw can pick and their probabilities (renormalised over the set): most
  // likely first (ties in id order) when top-k or top-p cuts, all of them in id order when
  // nothing does. Greedy: the argmax alone, with probability 1.
  const std::vector<Candidate>& candidates(std::span<const float> logits);
  // Draws the next token: one uniform number per call, except greedy, which draws none.
  int32_t next(std::span<const float> logits);

 private:
  SamplingOptions options_;
  Random rng_;
  std::vector<Candidate> candidates_;
};

}  // namespace kiln
