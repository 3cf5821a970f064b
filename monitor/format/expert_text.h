// The routing of a run's mixture-of-experts layers as text, the same in `kiln runs show` and
// the terminal UI: the worst layer's imbalance and the aux loss in one line, and each layer's
// imbalance as a short cell.
#pragma once

#include <string>
#include <vector>

#include "store/types.h"

namespace kiln {

// From each layer's latest load: "worst imbalance 1.84 at layer 3 (4 MoE layers, step 120),
// aux loss 0.0123 (mean of the layers)". Empty for a run with no expert loads; the aux loss
// part is left out when no layer logged one.
std::string experts_summary(const std::vector<store::ExpertLoad>& latest);

// "L3 1.84" ("L3 -" when the layer routed no token).
std::string layer_imbalance_cell(const store::ExpertLoad& load);

}  // namespace kiln
