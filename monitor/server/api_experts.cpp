// GET /api/runs/{run}/experts?layer=&from=&to=&limit=: the routing of a run's MoE layers as
// the run page's heatmaps draw it, one column-wise series per layer (docs/moe.md).
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "monitor/server/api_call.h"
#include "monitor/server/server_limits.h"
#include "store/expert_load.h"
#include "store/expert_queries.h"
#include "store/json_rows.h"

namespace kiln::monitor {

using nlohmann::json;

namespace {

std::string joined(const std::vector<int>& layers) {
  std::string text;
  for (int layer : layers) text += (text.empty() ? "" : ", ") + std::to_string(layer);
  return text;
}

// {"layer", "experts", "step": [...], "tokens": [[...] per step], "dropped": [[...] or []],
// "aux_loss": [...], "router_entropy": [...], "imbalance": [...]}
json series_json(std::span<const store::ExpertLoad> loads) {
  json step = json::array(), tokens = json::array(), dropped = json::array(), aux = json::array(),
       entropy = json::array(), imbalance = json::array();
  size_t experts = 0;
  for (const auto& load : loads) {
    step.push_back(load.step);
    tokens.push_back(load.tokens);
    dropped.push_back(load.dropped);
    aux.push_back(store::json_number(load.aux_loss));
    entropy.push_back(store::json_number(load.router_entropy));
    imbalance.push_back(store::json_number(store::expert_imbalance(load.tokens)));
    experts = load.tokens.size();
  }
  return {{"layer", loads.front().layer},       {"experts", experts}, {"step", step},           {"tokens", tokens},
          {"dropped", dropped},   {"aux_loss", aux},    {"router_entropy", entropy}, {"imbalance", imbalance}};
}

}  // namespace

Reply get_experts(ApiCall& call) {
  store::ExpertRange range;
  if (const auto layer = call.target.integer("layer")) {
    if (*layer < 0 || *layer >= store::kMaxExpertLayers)
      throw ApiError(http::status::bad_request,
                     "layer must be from 0 to " + std::to_string(store::kMaxExpertLayers - 1));
    range.layer = static_cast<int>(*layer);
  }
  range.from = call.target.integer("from").value_or(range.from);
  range.to = call.target.integer("to").value_or(range.to);
  if (range.from > range.to)
    throw ApiError(http::status::bad_request,
                   "from (" + std::to_string(range.from) + ") is after to (" + std::to_string(range.to) + ")");
  const int64_t limit = call.target.integer("limit").value_or(limits::kDefaultExpertSteps);
  if (limit < 1 || limit > limits::kMaxExpertSteps)
    throw ApiError(http::status::bad_request, "limit must be from 1 to " + std::to_string(limits::kMaxExpertSteps));

  auto db = call.reads();
  store::ReadSnapshot snapshot(*db);
  const std::vector<store::ExpertLoad> latest = store::latest_expert_loads(*db, call.run_id);
  std::vector<int> layers;
  for (const auto& load : latest) layers.push_back(load.layer);
  if (range.layer && std::find(layers.begin(), layers.end(), *range.layer) == layers.end())
    throw ApiError(http::status::bad_request,
                   "layer " + std::to_string(*range.layer) + " has no expert loads in this run " +
                       (layers.empty() ? std::string("(it has none)") : "(its MoE layers: " + joined(layers) + ")"));
  // Fewer steps per layer when the layers' experts would pass the answer's bound.
  size_t experts = 0;
  for (const auto& load : latest)
    if (!range.layer || load.layer == *range.layer) experts += load.tokens.size();
  range.max_steps = std::min(static_cast<size_t>(limit), std::max<size_t>(1, limits::kMaxExpertCells / std::max<size_t>(1, experts)));

  const std::vector<store::ExpertLoad> loads = store::list_expert_loads(*db, call.run_id, range);
  json series = json::array();
  for (size_t begin = 0; begin < loads.size();) {
    size_t end = begin;
    while (end < loads.size() && loads[end].layer == loads[begin].layer) ++end;
    series.push_back(series_json(std::span(loads).subspan(begin, end - begin)));
    begin = end;
  }
  return json_reply({{"run", call.run_address()},
                     {"layers", layers},
                     {"last_step", store::json_number(store::last_expert_step(*db, call.run_id))},
                     {"steps_per_layer", range.max_steps},
                     {"series", series}});
}

}  // namespace kiln::monitor
