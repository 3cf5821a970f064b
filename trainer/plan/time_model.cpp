#include "trainer/plan/time_model.h"

#include <algorithm>
#include <vector>

#include "trainer/config/lora_targets.h"
#include "trainer/model/flops.h"
#include "trainer/parallel/pipeline_timeline.h"
#include "trainer/plan/rank_build.h"

namespace kiln {
namespace {

// Elements of the compute dtype the memory-bound ops of a block move per token and per
// d_model element of the residual stream, forward and backward, with what else a layer costs
// that the rates miss: 100, fitted to kiln's H100 profiles of gpt2-124m and llama-1b
// (bench/results, 2026-11-23) and within 10% of H200 steps (docs/planner.md). Since
// 2026-11-27 a GPT-2 block's products carry its biases and GELU (the fused products), which
// removes the 47 that bench/planner_calibration.py counts in that gpt2-124m profile for them
// (the bias adds 18, GELU forward 8 and backward 12, the bias gradients 9): 53 is left.
double elementwise_per_token_width(const ModelConfig& m) { return m.is_llama() ? 100 : 53; }

// Elements of the logits each token moves through the loss, forward and backward.
constexpr double kLossPerLogit = 3;
// Ops a block runs per micro-batch, forward and backward; the output layer and loss's.
constexpr double kOpsPerLayer = 40, kOpsPerHead = 10;
// Bytes per parameter element of an optimizer step: AdamW over the shard (master weights,
// moments, gradient, parameter: 30) and, over the whole buffer, unscaling, the norm and
// zeroing the gradients (16).
constexpr double kAdamWBytes = 30, kGradientPassBytes = 16;

double dtype_bytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

// A layer's parameters: all of them (the experts' apart) and those a token's products use.
struct LayerParams {
  double dense = 0, experts = 0, active = 0;
  bool moe = false;
};

LayerParams layer_params(const ModelConfig& m, int layer) {
  const bool llama = m.is_llama();
  const double d = m.d_model, f = m.ffn_dim();
  const double norms = llama ? 2 * d : 4 * d;
  LayerParams p;
  p.dense = norms + static_cast<double>(attention_parameter_count(m));
  if (m.moe.is_moe_layer(layer)) {
    const double ef = m.expert_ffn_dim(), gated = llama ? 2 : 1;
    const double expert = d * gated * ef + ef * d, shared = m.moe.shared_experts * expert;
    p.moe = true;
    p.dense += m.moe.num_experts * d + shared;
    p.experts = m.moe.num_experts * expert;
    p.active = p.dense + m.moe.top_k * expert;
  } else {
    p.dense += d * (llama ? 2 : 1) * f + f * d;
    p.active = p.dense;
  }
  return p;
}

// Whether a group whose members sit `stride` ranks apart, n of them, stays within a node.
const LinkSpec& link(const DeviceSpec& device, int stride, int n, int ranks_per_node) {
  return int64_t{stride} * n <= ranks_per_node ? device.intra_node : device.inter_node;
}

double transfer_s(double bytes, const LinkSpec& l) { return bytes / l.bytes_per_s + l.latency_s; }

}  // namespace

double ring_all_reduce_s(double bytes, int n, const LinkSpec& l) {
  if (n <= 1 || bytes <= 0) return 0;  // nothing to move: no collective
  return 2.0 * (n - 1) / n * bytes / l.bytes_per_s + 2.0 * (n - 1) * l.latency_s;
}

double ring_gather_s(double bytes, int n, const LinkSpec& l) {
  if (n <= 1 || bytes <= 0) return 0;  // nothing to move: no collective
  return 1.0 * (n - 1) / n * bytes / l.bytes_per_s + (n - 1) * l.latency_s;
}

StepPrediction predict_step(const Config& config, const ParallelLayout& layout, const DeviceSpec& device,
                            int ranks_per_node) {
  const ModelConfig& m = config.model;
  const int tp = layout.tp(), cp = layout.cp(), pp = layout.pp(), dp = layout.dp(), ep = layout.ep();
  const double b = dtype_bytes(config.precision.dtype), d = m.d_model, T = m.seq_len;
  const double Vp = static_cast<double>(m.padded_vocab()) / tp;
  const double tokens = static_cast<double>(config.train.micro_batch) * T / cp;
  const std::string& recompute = config.train.recompute;
  // On the CPU the ranks of a machine share its cores: each runs its own threads (the
  // backend's, or an even share of the cores), at the measured rate per thread, and slower
  // when the machine's ranks ask for more threads than it has cores.
  double share = 1.0;
  if (!device.gpu) {
    const int threads = config.backend.threads > 0 ? config.backend.threads
                                                   : std::max(1, device.cores / std::max(1, ranks_per_node));
    const double busy = static_cast<double>(threads) * ranks_per_node;
    share = static_cast<double>(device.rate_threads) / threads * std::max(1.0, busy / device.cores);
  }
  const double gemm = device.gemm_flops / share, attention = device.attention_flops / share,
               bandwidth = device.bytes_per_s / share;
  const LinkSpec& tensor_link = link(device, 1, tp, ranks_per_node);
  const LinkSpec& context_link = link(device, tp, cp, ranks_per_node);
  const LinkSpec& gradient_link = link(device, tp, cp * dp, ranks_per_node);
  const LinkSpec& expert_link = link(device, layout.etp(), ep, ranks_per_node);
  const LinkSpec& stage_link = link(device, tp * cp * dp, pp, ranks_per_node);

  // Per micro-batch, the busiest stage.
  StepPrediction per_micro;
  double stage_params = 0, stage_expert_params = 0, busiest = -1;
  double stage_block_params = 0, stage_layers = 1;  // of the busiest stage
  for (int stage = 0; stage < pp; ++stage) {
    std::vector<PipelineChunk> chunks = stage_chunks(config, layout, stage);
    if (chunks.empty()) chunks = {{0, m.n_layer, true, true}};
    double active = 0, dense = 0, experts = 0, layers = 0, moe_layers = 0;
    bool head = false, embedding = false;
    const auto add_layer = [&](int l, double more) {
      const LayerParams p = layer_params(m, l);
      active += p.active + more;
      dense += p.dense + more;
      experts += p.experts;
      layers += 1;
      moe_layers += p.moe ? 1 : 0;
    };
    for (const PipelineChunk& c : chunks) {
      head = head || c.head;
      embedding = embedding || c.embedding;
      for (int l = c.first_layer; l < c.end_layer; ++l) add_layer(l, 0);
      // The multi-token prediction modules sit with the head: each a block, its projection of
      // [e | h] and three norms.
      if (c.head)
        for (int l = m.n_layer; l < m.block_count(); ++l) add_layer(l, 2 * d * d + 3 * d);
    }
    // The output layer's products: once, and once more for each module.
    const double heads = head ? 1 + m.mtp_depth : 0;
    // A frozen base (LoRA) makes no weight gradients: its products run twice, not three times
    // (the adapters' own are small enough to leave out).
    const double passes = m.lora.enabled() ? 4 : 6;
    double gemm_flops = passes * tokens * active / tp + heads * passes * tokens * d * Vp;
    double attention_flops = 7 * T * m.n_head * m.head_dim() * tokens * layers / tp;
    if (recompute == "full") gemm_flops += 2 * tokens * active / tp;
    if (recompute != "none") attention_flops += 2 * T * m.n_head * m.head_dim() * tokens * layers / tp;
    double moved = tokens * layers * d * elementwise_per_token_width(m) * b / tp + heads * tokens * Vp * kLossPerLogit * b;
    // A split backward (the zero-bubble schedules) copies each linear layer's input and output
    // gradient for its weight pass, written then read: the four products' about 6 d + 2 ffn
    // values a token, split over the tensor ranks; and each of the two norms' input and output
    // gradient, 4 d values a token, split only under sequence parallelism.
    if (splits_backward(config.parallel) && pp > 1) {
      const int sp = config.parallel.sequence_parallel ? tp : 1;
      moved += 2 * tokens * layers * ((6.0 * d + 2.0 * m.ffn_dim()) / tp + 4.0 * d / sp) * b;
    }
    const double attention_s = attention_flops / attention;
    StepPrediction s;
    s.compute_s = gemm_flops / gemm + attention_s + moved / bandwidth +
                  (kOpsPerLayer * layers + (head ? kOpsPerHead : 0)) * device.op_overhead_s;
    const int tensor_collectives = recompute == "full" ? 6 : 4;
    s.tensor_s = tp > 1 ? tensor_collectives * layers * ring_all_reduce_s(tokens * d * b, tp, tensor_link) : 0;
    if (cp > 1) {
      const double block = tokens * 2.0 * m.kv_heads() * m.head_dim() * b / tp;
      s.context_s = std::max(0.0, 3.0 * (cp - 1) * layers * transfer_s(block, context_link) - attention_s);
    }
    if (ep > 1)
      s.expert_s = 4 * moe_layers *
                   (tokens * m.moe.top_k * d * b * (ep - 1) / ep / expert_link.bytes_per_s + (ep - 1) * expert_link.latency_s);
    if (pp > 1) s.pipeline_s = 2.0 * static_cast<double>(chunks.size()) * transfer_s(tokens * d * b, stage_link);
    const double total = s.compute_s + s.tensor_s + s.context_s + s.expert_s + s.pipeline_s;
    if (total > busiest) {
      busiest = total;
      per_micro = s;
      // The head's stage also keeps an untied model's embedding copy for multi-token prediction.
      const bool embedding_copy = head && !embedding && !m.tie_embeddings && m.mtp_depth > 0;
      stage_params = dense / tp + (embedding || embedding_copy ? d * Vp : 0) +
                     (head && !(m.tie_embeddings && pp == 1) ? d * Vp : 0);
      // Under LoRA only the adapters' gradients are reduced (each rank's pieces and the
      // factors it holds whole, at most a layer's whole adapters).
      if (m.lora.enabled()) stage_params = layers * static_cast<double>(lora_layer_parameters(m));
      stage_expert_params = experts / (ep * layout.etp());
      stage_block_params = dense / tp;
      stage_layers = std::max(1.0, layers);
    }
  }

  StepPrediction p;
  const int micro_batches = micro_batches_per_step(config, layout);
  const double bubble = schedule_bubble(config, layout);
  // The stage works m micro-batches; the bubble idles it (pp - 1) / vpp of them more.
  p.compute_s = micro_batches * per_micro.compute_s;
  p.tensor_s = micro_batches * per_micro.tensor_s;
  p.context_s = micro_batches * per_micro.context_s;
  p.expert_s = micro_batches * per_micro.expert_s;
  p.pipeline_s = micro_batches * per_micro.pipeline_s + micro_batches * busiest * bubble / (1 - bubble);
  // Gradients are float; the distributed optimizer reduce-scatters them and all-gathers the
  // updated parameters, else the replicas all-reduce them (kiln starts its buckets during
  // backward, but on the compute stream: nothing overlaps yet). With shard groups
  // (parallel.shard_group) the reduce-scatters and gathers stay within a group and each
  // reduced shard is all-reduced over its copies in the other groups.
  const ParallelConfig& par = config.parallel;
  const ShardLevel level = shard_level(par);
  const int gradient_ranks = cp * dp, expert_ranks = layout.edp();
  const int shard_ranks = par.shard_group > 0 ? par.shard_group : gradient_ranks, copies = gradient_ranks / shard_ranks;
  const LinkSpec& shard_link = link(device, tp, shard_ranks, ranks_per_node);
  const LinkSpec& copies_link = link(device, tp * shard_ranks, copies, ranks_per_node);
  const bool sharded = level >= ShardLevel::Optimizer && shard_ranks > 1;
  // A float shard's reduce-scatter, and its sum over the copies.
  const auto reduce_scatter_s = [&](double params) {
    return ring_gather_s(4 * params, shard_ranks, shard_link) +
           ring_all_reduce_s(4 * params / shard_ranks, copies, copies_link);
  };
  const auto gather_values_s = [&](double params) { return ring_gather_s(b * params, shard_ranks, shard_link); };
  const double experts_s = sharded ? ring_gather_s(4 * stage_expert_params, expert_ranks, gradient_link) +
                                         ring_gather_s(b * stage_expert_params, expert_ranks, gradient_link)
                                   : ring_all_reduce_s(4 * stage_expert_params, expert_ranks, gradient_link);
  const double dense_s = sharded ? reduce_scatter_s(stage_params) + gather_values_s(stage_params)
                                 : ring_all_reduce_s(4 * stage_params, gradient_ranks, gradient_link);
  p.data_s = dense_s + experts_s;
  if (level >= ShardLevel::Gradients && shard_ranks > 1 && !par.shard_per_step) {
    // Sharded in units (trainer/train/sharded_units.h): every micro-batch each block's
    // gradients are reduce-scattered as its backward ends and, with sharded values, its
    // weights gathered before its forward and its backward. What the blocks' compute hides
    // is hidden but for the first transfer of a pass (nothing, without prefetch). A tied
    // model's embeddings and head are reduced once a step, and gathered once with sharded
    // values. Untied, they are reduced every micro-batch beside the blocks and gathered where
    // they are read: every micro-batch when one stage holds both (they share a window), else
    // once a step (the window keeps the one it holds). A block's experts move with it, over
    // the expert-data ranks. Without sharded values the updated values are all-gathered once
    // a step, as the distributed optimizer's are.
    const double outer = stage_params - stage_block_params;
    const bool ends_per_use = !m.tie_embeddings;
    const double expert_gather_s = ring_gather_s(b * stage_expert_params, expert_ranks, gradient_link);
    const double reduce_s = reduce_scatter_s(stage_block_params) + (ends_per_use ? reduce_scatter_s(outer) : 0) +
                            ring_gather_s(4 * stage_expert_params, expert_ranks, gradient_link);
    const double gather_s =
        level == ShardLevel::Parameters ? gather_values_s(stage_block_params) + expert_gather_s : 0;
    const double outer_gather_s = level == ShardLevel::Parameters ? gather_values_s(outer) : 0;
    const double forward_s = per_micro.compute_s / 3, backward_s = per_micro.compute_s - forward_s;
    const auto exposed = [&](double comm_s, double compute_s) {
      if (!par.shard_prefetch) return comm_s;
      return comm_s / stage_layers + std::max(0.0, comm_s * (stage_layers - 1) / stage_layers - compute_s);
    };
    const bool outer_each_micro_batch = ends_per_use && pp == 1;
    p.data_s = micro_batches * (exposed(gather_s + (outer_each_micro_batch ? outer_gather_s : 0), forward_s) +
                                exposed(gather_s + reduce_s, backward_s)) +
               (ends_per_use ? 0 : reduce_scatter_s(outer)) + (outer_each_micro_batch ? 0 : outer_gather_s) +
               (level == ShardLevel::Parameters ? 0 : gather_values_s(stage_params) + expert_gather_s);
  }
  const double params = stage_params + stage_expert_params;
  const double shard = sharded ? stage_params / shard_ranks + stage_expert_params / std::max(1, expert_ranks) : params;
  p.optimizer_s = (params * kGradientPassBytes + shard * kAdamWBytes) / bandwidth;
  p.step_s = p.compute_s + p.tensor_s + p.context_s + p.expert_s + p.pipeline_s + p.data_s + p.optimizer_s;
  p.tokens_per_s = static_cast<double>(config.train.global_batch) * T / p.step_s;
  if (device.peak_flops > 0)
    p.mfu = p.tokens_per_s * static_cast<double>(model_flops_per_token(m)) / (device.peak_flops * layout.world());
  return p;
}

}  // namespace kiln
