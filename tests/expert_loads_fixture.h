// Synthetic routing for the tests of what shows expert loads (the dashboard, `kiln runs`), as
// a mixture-of-experts run's rank 0 would hand them to RunRecorder::log_expert_loads: each
// layer has a hot expert whose share grows with the step, the odd layers drop what passes a
// capacity of 1.25 times the fair share, and the aux loss and router entropy follow the counts
// (the aux loss as Switch Transformer's E x sum f_i^2 with the router's probabilities taken
// equal to the token fractions).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "store/types.h"

namespace kiln::test {

inline std::vector<store::ExpertLoad> synthetic_expert_loads(int64_t step, int layers, int experts) {
  std::vector<store::ExpertLoad> loads;
  for (int layer = 0; layer < layers; ++layer) {
    store::ExpertLoad load;
    load.step = step;
    load.layer = layer;
    const int hot = (layer * 3) % experts;
    for (int e = 0; e < experts; ++e)
      load.tokens.push_back(1000 + 40 * ((e * 7 + layer * 3 + step) % 11) + (e == hot ? 20 * step : 0));
    int64_t total = 0;
    for (int64_t n : load.tokens) total += n;
    if (layer % 2 == 1) {
      const int64_t capacity = total * 5 / (4 * experts);
      for (int64_t n : load.tokens) load.dropped.push_back(n > capacity ? n - capacity : 0);
    }
    double aux = 0, entropy = 0;
    for (int64_t n : load.tokens) {
      const double f = static_cast<double>(n) / static_cast<double>(total);
      aux += f * f;
      if (f > 0) entropy -= f * std::log(f);
    }
    load.aux_loss = aux * experts;
    load.router_entropy = entropy;
    loads.push_back(std::move(load));
  }
  return loads;
}

}  // namespace kiln::test
