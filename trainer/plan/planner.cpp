#include "trainer/plan/planner.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>

#include "base/check.h"
#include "base/human_format.h"

namespace kiln {
namespace {

std::vector<int> powers_of_two(int up_to) {
  std::vector<int> out;
  for (int n = 1; n <= up_to; n *= 2) out.push_back(n);
  return out;
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) out.push_back(k);
  return out;
}

// Why the split's arithmetic refuses the candidate, checked cheaply before it is predicted;
// "" when it divides. The config's own validation, run on the ones sized, has the last word.
std::string does_not_divide(const Config& c, int devices) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.parallel;
  const int model_ranks = p.tp * p.cp * p.pp;
  // The config's own layout (--this-layout) may ask for more ranks than there are devices.
  if (devices % model_ranks != 0)
    return fmt::format("tp {} x cp {} x pp {} = {} ranks do not divide {} devices", p.tp, p.cp, p.pp, model_ranks,
                       devices);
  const int dp = devices / model_ranks;
  if (m.n_head % p.tp != 0 || m.kv_heads() % p.tp != 0)
    return fmt::format("tp {} does not divide the {} heads and {} key/value heads", p.tp, m.n_head, m.kv_heads());
  if (m.ffn_dim() % p.tp != 0) return fmt::format("tp {} does not divide the MLP's {} units", p.tp, m.ffn_dim());
  if (p.cp > 1 && m.seq_len % (2 * p.cp) != 0)
    return fmt::format("cp {} needs a sequence of a multiple of {} tokens, not {}", p.cp, 2 * p.cp, m.seq_len);
  if (p.sequence_parallel && (m.seq_len / p.cp) % p.tp != 0)
    return fmt::format("sequence parallelism over tp {} does not divide a rank's {} tokens", p.tp, m.seq_len / p.cp);
  if (p.shard_group > 0 && (dp * p.cp) % p.shard_group != 0)
    return fmt::format("shard groups of {} do not divide the {} gradient ranks", p.shard_group, dp * p.cp);
  const int64_t per_step = int64_t{c.train.micro_batch} * dp;
  if (c.train.global_batch % per_step != 0)
    return fmt::format("the global batch of {} is not a multiple of micro-batch {} x dp {}", c.train.global_batch,
                       c.train.micro_batch, dp);
  if (p.vpp > 1 && (c.train.global_batch / per_step) % p.pp != 0)
    return fmt::format("interleaving needs the {} micro-batches a step to be a multiple of pp {}",
                       c.train.global_batch / per_step, p.pp);
  return "";
}

std::string candidate_name(const Config& c, const ParallelLayout& layout) {
  std::string name = layout.name() + (layout.vpp() > 1 ? fmt::format(" vpp{}", layout.vpp()) : "") +
                     fmt::format(" mb{}", c.train.micro_batch);
  if (c.parallel.schedule != "1f1b") name += " " + c.parallel.schedule;
  if (c.train.recompute != "none") name += " " + c.train.recompute;
  const ShardLevel shard = shard_level(c.parallel);
  if (shard == ShardLevel::Optimizer) name += " dist-opt";
  if (shard == ShardLevel::Gradients) name += " shard-grads";
  if (shard == ShardLevel::Parameters) name += " shard-params";
  return name;
}

// The candidates, each a config for the layout.
std::vector<Config> enumerate(const Config& base, int devices, int per_node) {
  const ModelConfig& m = base.model;
  std::vector<int> micro_batches = {1, 2, 4, 8};
  if (std::find(micro_batches.begin(), micro_batches.end(), base.train.micro_batch) == micro_batches.end())
    micro_batches.push_back(base.train.micro_batch);
  std::vector<Config> out;
  for (int tp : powers_of_two(std::min(per_node, devices)))
    for (int cp : powers_of_two(devices / tp)) {
      if (cp > 1 && m.moe.enabled()) continue;
      for (int pp : divisors(m.n_layer)) {
        if (devices % (tp * cp * pp) != 0) continue;
        const int dp = devices / (tp * cp * pp);
        std::vector<int> vpps = {1};
        for (int v = 2; pp > 1 && v <= 4; v *= 2)
          if (m.n_layer % (pp * v) == 0) vpps.push_back(v);
        std::vector<int> eps = {1};
        for (int e = 2; m.moe.enabled() && e <= m.moe.num_experts; e *= 2)
          if (m.moe.num_experts % e == 0 && (tp * dp) % (e * tp) == 0) eps.push_back(e);
        // The zero-bubble schedules where they run: one chunk a stage (two in a V, which needs
        // 2 pp micro-batches under DualPipeV), no FP8, the units unsharded.
        const auto schedules = [&](int vpp, int micro, const std::string& shard) {
          std::vector<std::string> names = {"1f1b"};
          if (pp == 1 || vpp > 1 || base.precision.dtype == "fp8" || shard == "gradients" || shard == "parameters")
            return names;
          names.push_back("zb-h1");
          if (m.n_layer % (2 * pp) != 0) return names;
          names.push_back("zbv");
          if (base.train.global_batch / (int64_t{micro} * dp) >= 2 * pp) names.push_back("dualpipev");
          return names;
        };
        for (int vpp : vpps)
          for (int ep : eps)
            for (int micro : micro_batches)
              for (const char* recompute : {"none", "selective", "full"})
                for (const char* shard : {"none", "optimizer", "gradients", "parameters"}) {
                  const std::string level = shard;
                  if (level != "none" && dp * cp == 1) continue;
                  if (level == "none" && base.parallel.shard_group > 0) continue;
                  // Units do not shard a frozen base (config.cpp).
                  if ((level == "gradients" || level == "parameters") && m.lora.enabled()) continue;
                  for (const std::string& schedule : schedules(vpp, micro, level)) {
                    Config c = base;
                    c.parallel.schedule = schedule;
                    c.parallel.tp = tp;
                    c.parallel.cp = cp;
                    c.parallel.pp = pp;
                    c.parallel.vpp = vpp;
                    c.parallel.ep = ep;
                    c.parallel.etp = 0;
                    c.parallel.first_stage_layers = c.parallel.last_stage_layers = 0;
                    c.parallel.sequence_parallel = tp > 1;
                    c.parallel.shard = shard;
                    c.parallel.distributed_optimizer = false;
                    c.train.micro_batch = micro;
                    c.train.recompute = recompute;
                    out.push_back(std::move(c));
                  }
                }
      }
    }
  return out;
}

// The rank that needs the most: the first stage (most micro-batches in flight, the
// embedding) or the last (the output layer and the logits).
void size_ranks(PlannedLayout& l, const ParallelLayout& layout, const DeviceSpec& device, int per_node, Ops& ops) {
  const Config& c = l.config;
  const int threads = c.backend.threads > 0 ? c.backend.threads : std::max(1, device.cores / per_node);
  const size_t workspace =
      op_workspace_bytes(device.gpu, threads, c.train.micro_batch, c.model.seq_len / layout.cp(),
                         c.model.n_head / layout.tp(), c.model.head_dim());
  for (int stage : {0, layout.pp() - 1}) {
    RankCoordinates at;
    at.pp = stage;
    const int rank = layout.rank_of(at);
    RankMemory memory = plan_rank_memory(c, layout, rank, device.gpu ? Device::Cuda : Device::Cpu, ops, workspace);
    if (!l.sized || memory.total() > l.memory.total()) {
      l.memory = std::move(memory);
      l.memory_rank = rank;
    }
    l.sized = true;
  }
}

}  // namespace

Plan make_plan(const PlanRequest& request) {
  const DeviceSpec& device = request.device;
  KILN_CHECK(request.devices >= 1, "plan: --gpus must be at least 1");
  Plan plan;
  plan.nodes = request.nodes > 0 ? request.nodes
                                 : (request.devices + device.devices_per_node - 1) / device.devices_per_node;
  KILN_CHECK(request.devices % plan.nodes == 0, fmt::format("plan: {} devices do not spread evenly over {} nodes",
                                                            request.devices, plan.nodes));
  plan.ranks_per_node = request.devices / plan.nodes;
  KILN_CHECK(plan.ranks_per_node <= device.devices_per_node,
             fmt::format("plan: {} devices a node, but a node of {} holds {}", plan.ranks_per_node, device.name,
                         device.devices_per_node));

  std::vector<PlannedLayout> predicted;
  std::vector<Config> candidates = {request.config};
  if (request.search) candidates = enumerate(request.config, request.devices, plan.ranks_per_node);
  for (Config& c : candidates) {
    ++plan.candidates;
    std::string why = does_not_divide(c, request.devices);
    if (why.empty()) {
      try {
        const ParallelLayout layout(c.parallel, request.devices);
        PlannedLayout l;
        l.time = predict_step(c, layout, device, plan.ranks_per_node);
        l.name = candidate_name(c, layout);
        l.config = std::move(c);
        predicted.push_back(std::move(l));
        continue;
      } catch (const Error& e) {
        why = e.what();
      }
    }
    ++plan.not_dividing;
    if (plan.divide_reasons.size() < 4 &&
        std::find(plan.divide_reasons.begin(), plan.divide_reasons.end(), why) == plan.divide_reasons.end())
      plan.divide_reasons.push_back(why);
  }
  std::stable_sort(predicted.begin(), predicted.end(),
                   [](const PlannedLayout& a, const PlannedLayout& b) { return a.time.step_s < b.time.step_s; });

  // Laying out calls no op: any backend serves.
  const std::unique_ptr<Ops> sizing_ops = make_cpu_ops(1);
  for (size_t i = 0; i < predicted.size(); ++i) {
    if (request.top > 0 && static_cast<int>(plan.fitting.size()) == request.top) {
      plan.not_sized = static_cast<int>(predicted.size() - i);
      break;
    }
    PlannedLayout& l = predicted[i];
    try {
      l.config = config_from_json(config_to_json(l.config));
      const ParallelLayout layout(l.config.parallel, request.devices);
      size_ranks(l, layout, device, plan.ranks_per_node, *sizing_ops);
    } catch (const Error& e) {
      ++plan.not_dividing;
      if (plan.divide_reasons.size() < 4) plan.divide_reasons.push_back(e.what());
      continue;
    }
    if (static_cast<double>(l.memory.total()) > device.memory_bytes) {
      l.refused = fmt::format("does not fit: rank {} needs {} of {}'s {}", l.memory_rank,
                              human_bytes(l.memory.total()), device.name,
                              human_bytes(static_cast<size_t>(device.memory_bytes)));
      plan.too_big.push_back(std::move(l));
    } else {
      plan.fitting.push_back(std::move(l));
    }
  }
  return plan;
}

PlannedLayout best_layout(const Config& config, int devices, const DeviceSpec& device) {
  PlanRequest request;
  request.config = config;
  request.devices = devices;
  request.device = device;
  request.top = 1;
  Plan plan = make_plan(request);
  if (plan.fitting.empty() && plan.too_big.empty())
    fail(fmt::format("plan: no layout of this config divides {} device{}: {}", devices, devices == 1 ? "" : "s",
                     plan.divide_reasons.empty() ? "none enumerated" : plan.divide_reasons.front()));
  if (plan.fitting.empty()) {
    const auto smallest = std::min_element(plan.too_big.begin(), plan.too_big.end(),
                                           [](const PlannedLayout& a, const PlannedLayout& b) {
                                             return a.memory.total() < b.memory.total();
                                           });
    fail(fmt::format("plan: no layout of this config fits {} {} device{}{}", devices, device.name,
                     devices == 1 ? "" : "s",
                     smallest == plan.too_big.end() ? "" : "; the smallest, " + smallest->name + ", " + smallest->refused));
  }
  return std::move(plan.fitting.front());
}

}  // namespace kiln
