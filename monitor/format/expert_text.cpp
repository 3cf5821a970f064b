#include "monitor/format/expert_text.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "store/expert_load.h"

namespace kiln {
namespace {

std::string imbalance_text(double imbalance) {
  return std::isnan(imbalance) ? "-" : fmt::format("{:.2f}", imbalance);
}

}  // namespace

std::string experts_summary(const std::vector<store::ExpertLoad>& latest) {
  if (latest.empty()) return {};
  int64_t step = latest.front().step;
  double aux_sum = 0;
  int aux_count = 0;
  for (const auto& load : latest) {
    step = std::max(step, load.step);
    if (!std::isnan(load.aux_loss)) aux_sum += load.aux_loss, ++aux_count;
  }
  const std::string layers = fmt::format("{} MoE layer{}, step {}", latest.size(), latest.size() == 1 ? "" : "s", step);
  std::string text;
  if (const store::ExpertLoad* worst = store::worst_expert_layer(latest))
    text = fmt::format("worst imbalance {} at layer {} ({})", imbalance_text(store::expert_imbalance(worst->tokens)),
                       worst->layer, layers);
  else
    text = "no token routed yet (" + layers + ")";
  if (aux_count > 0) text += fmt::format(", aux loss {:.4g} (mean of the layers)", aux_sum / aux_count);
  return text;
}

std::string layer_imbalance_cell(const store::ExpertLoad& load) {
  return fmt::format("L{} {}", load.layer, imbalance_text(store::expert_imbalance(load.tokens)));
}

}  // namespace kiln
