// What the store derives from and checks in a mixture-of-experts layer's load
// (types.h's ExpertLoad), shared by the writer, the readers and the views.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "store/types.h"

namespace kiln::store {

// The busiest expert's share over a fair share: max / mean of the tokens (1 is perfectly
// balanced, the expert count is everything on one expert). NaN when no token was routed.
double expert_imbalance(std::span<const int64_t> tokens);

// Refuses, in one line naming the layer and step, a load the store would not keep: more
// than kMaxExpertLayers loads in one call, a layer
// index outside [0, kMaxExpertLayers), no experts or more than kMaxExpertsPerLayer, a
// `dropped` that is neither empty nor one count per expert, a negative count, or a
// (step, layer) given twice in one call.
void check_expert_loads(const std::vector<ExpertLoad>& loads);

// The layer with the highest imbalance among `loads` (the lowest index on a tie), or null
// when no layer routed a token.
const ExpertLoad* worst_expert_layer(const std::vector<ExpertLoad>& loads);

}  // namespace kiln::store
