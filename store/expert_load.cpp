#include "store/expert_load.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "store/error.h"

namespace kiln::store {

double expert_imbalance(std::span<const int64_t> tokens) {
  if (tokens.empty()) return kNoValue;
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  if (total <= 0) return kNoValue;
  const int64_t most = *std::max_element(tokens.begin(), tokens.end());
  return static_cast<double>(most) * static_cast<double>(tokens.size()) / static_cast<double>(total);
}

void check_expert_loads(const std::vector<ExpertLoad>& loads) {
  if (loads.size() > static_cast<size_t>(kMaxExpertLayers))
    fail("store: " + std::to_string(loads.size()) + " expert loads in one call; the store keeps at most " +
         std::to_string(kMaxExpertLayers) + " (one per MoE layer)");
  std::set<std::pair<int64_t, int>> seen;
  for (const ExpertLoad& load : loads) {
    const std::string where = "expert loads of layer " + std::to_string(load.layer) + " at step " +
                              std::to_string(load.step);
    if (load.layer < 0 || load.layer >= kMaxExpertLayers)
      fail("store: " + where + ": the layer index must be from 0 to " + std::to_string(kMaxExpertLayers - 1));
    if (load.tokens.empty() || load.tokens.size() > kMaxExpertsPerLayer)
      fail("store: " + where + ": " + std::to_string(load.tokens.size()) + " experts; the store keeps 1 to " +
           std::to_string(kMaxExpertsPerLayer) + " per layer");
    if (!load.dropped.empty() && load.dropped.size() != load.tokens.size())
      fail("store: " + where + ": " + std::to_string(load.dropped.size()) + " dropped counts for " +
           std::to_string(load.tokens.size()) + " experts (give one per expert, or none when dropless)");
    const auto negative = [](int64_t n) { return n < 0; };
    if (std::any_of(load.tokens.begin(), load.tokens.end(), negative) ||
        std::any_of(load.dropped.begin(), load.dropped.end(), negative))
      fail("store: " + where + ": a negative token count");
    if (!seen.insert({load.step, load.layer}).second) fail("store: " + where + ": given twice in one call");
  }
}

const ExpertLoad* worst_expert_layer(const std::vector<ExpertLoad>& loads) {
  const ExpertLoad* worst = nullptr;
  double most = 0;
  for (const ExpertLoad& load : loads) {
    const double imbalance = expert_imbalance(load.tokens);
    if (std::isnan(imbalance)) continue;
    if (!worst || imbalance > most || (imbalance == most && load.layer < worst->layer)) {
      worst = &load;
      most = imbalance;
    }
  }
  return worst;
}

}  // namespace kiln::store
