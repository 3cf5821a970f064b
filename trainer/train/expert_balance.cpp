#include "trainer/train/expert_balance.h"

#include <utility>
#include <vector>

#include "trainer/model/expert_routing.h"

namespace kiln {

namespace {
// Per layer: routed and dropped per expert, then the balancing loss and entropy summed over
// micro-batches, and the micro-batches.
int64_t layer_width(int64_t experts) { return 2 * experts + 3; }
}  // namespace

ExpertBalance::ExpertBalance(const Config& config, GptModel& model, Ops& ops, Communicator& world,
                             RunRecorder* recorder)
    : config_(config), model_(model), ops_(ops), world_(world), recorder_(recorder) {}

void ExpertBalance::restore_bias(std::map<int, std::vector<double>> bias) {
  expert_bias_ = std::move(bias);
  const std::vector<double> none(static_cast<size_t>(config_.model.moe.num_experts), 0.0);
  for (int l = 0; l < config_.model.block_count(); ++l)
    if (MoeMlp* experts = model_.experts(l); experts && !expert_bias_.count(l)) experts->set_bias(ops_, none);
  apply_expert_bias();
}

double ExpertBalance::finish_expert_step(int64_t step, bool logged) {
  const MoeConfig& moe = config_.model.moe;
  if (!moe.enabled()) return 0;
  double exchange_ms = 0;
  const int64_t E = moe.num_experts, width = layer_width(E);
  std::vector<double> sums(static_cast<size_t>(config_.model.block_count() * width), 0.0);
  for (int l = 0; l < config_.model.block_count(); ++l) {
    MoeMlp* experts = model_.experts(l);
    if (!experts) continue;
    // Taken every step, so each step's counts are its own.
    const ExpertLoadSum load = experts->take_load(ops_);
    exchange_ms += load.exchange_ms;
    double* row = sums.data() + l * width;
    for (int64_t e = 0; e < E; ++e) {
      row[e] = static_cast<double>(load.routed[static_cast<size_t>(e)]);
      row[E + e] = static_cast<double>(load.dropped[static_cast<size_t>(e)]);
    }
    row[2 * E] = load.balance;
    row[2 * E + 1] = load.entropy;
    row[2 * E + 2] = load.micro_batches;
  }
  const bool balancing = moe.bias_update_rate > 0;
  if (!logged && !balancing) return exchange_ms;
  if (world_.size() > 1)
    world_.all_reduce(Tensor{sums.data(), DType::F64, {static_cast<int64_t>(sums.size())}}, ReduceOp::Sum);

  std::vector<store::ExpertLoad> loads;
  for (int l = 0; l < config_.model.block_count(); ++l) {
    if (!moe.is_moe_layer(l)) continue;
    const double* row = sums.data() + l * width;
    std::vector<int64_t> routed(static_cast<size_t>(E)), dropped(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      routed[static_cast<size_t>(e)] = static_cast<int64_t>(row[e]);
      dropped[static_cast<size_t>(e)] = static_cast<int64_t>(row[E + e]);
    }
    if (balancing) {
      std::vector<double>& bias = expert_bias_[l];
      bias.resize(static_cast<size_t>(E), 0.0);
      move_selection_bias(bias, routed, moe.bias_update_rate);
    }
    const double micro_batches = row[2 * E + 2];
    if (logged && recorder_ && micro_batches > 0)
      loads.push_back({step, l, std::move(routed), std::move(dropped), row[2 * E] / micro_batches,
                       row[2 * E + 1] / micro_batches});
  }
  if (balancing) apply_expert_bias();
  if (!loads.empty()) recorder_->log_expert_loads(std::move(loads));
  return exchange_ms;
}

void ExpertBalance::apply_expert_bias() {
  for (const auto& [layer, bias] : expert_bias_)
    if (MoeMlp* experts = model_.experts(layer)) experts->set_bias(ops_, bias);
}

}  // namespace kiln
