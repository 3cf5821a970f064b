// What a run prints before step 1: the model, the backend and batch, the attention kernels,
// how it is split over the ranks (the pipeline's stages and bubble among it), the data, and
// the memory of every arena; and after its first step, how the matrix products' algorithms
// were chosen.
#include <fmt/core.h>

#include <algorithm>

#include "base/human_format.h"
#include "trainer/model/flops.h"
#include "trainer/parallel/pipeline_timeline.h"
#include "trainer/plan/rank_build.h"
#include "trainer/train/trainer.h"

namespace kiln {

namespace {
// precision.dtype, and under fp8 its recipe and where its products run.
std::string precision_text(const PrecisionConfig& p, Device device) {
  if (p.dtype != "fp8") return p.dtype;
  const std::string scaling = p.fp8_scaling == "delayed"
                                  ? fmt::format("delayed scaling over {} steps", p.fp8_amax_history)
                                  : std::string("current scaling");
  return fmt::format("fp8 ({}{}{})", device == Device::Cpu ? "emulated, " : "", scaling,
                     p.fp8_margin > 0 ? fmt::format(", margin {}", p.fp8_margin) : std::string());
}
// The schedule's name as the banner prints it.
std::string schedule_name(const ParallelConfig& p) {
  if (p.schedule == "zb-h1") return "ZB-H1 (each backward split in the input's gradient and the weights')";
  if (p.schedule == "zbv") return "ZBV (zero-bubble, two chunks a stage in a V, each backward split in two)";
  if (p.schedule == "dualpipev") return "DualPipeV (DeepSeek-V3's, two chunks a stage in a V)";
  return p.vpp > 1 ? "interleaved 1F1B" : "1F1B";
}

// How the layers are split over the stages and the schedule's bubble.
void print_pipeline(std::FILE* out, const Config& config, const ParallelLayout& layout, int accum) {
  const PipelinePlacement at = pipeline_placement(config, layout);
  const ParallelConfig& p = config.parallel;
  std::string stages;
  const std::vector<PipelineChunk> all = virtual_stages(config, layout);
  for (size_t v = 0; v < all.size(); ++v) {
    const PipelineChunk& c = all[v];
    const std::string held =
        c.layers() == 1 ? fmt::format("layer {}", c.first_layer)
                        : fmt::format("layers {}-{}", c.first_layer, c.end_layer - 1);
    stages += fmt::format("{}{} {}: {}{}{}", v == 0 ? "" : ", ", at.chunks > 1 ? "virtual stage" : "stage",
                          v, held, c.embedding ? " + embedding" : "", c.head ? " + head" : "");
  }
  const std::string where = at.v_shape      ? fmt::format(" (stage s holds virtual stages s and {} - s)", 2 * at.pp - 1)
                            : at.chunks > 1 ? fmt::format(" (virtual stage v on stage v mod {})", at.pp)
                                            : std::string();
  fmt::print(out, "kiln: pipeline of {} stages{}, {} schedule over {} micro-batches: bubble "
                   "{:.1f}% of each step; {}{}\n",
             at.pp, at.chunks > 1 ? fmt::format(" x {} virtual", at.chunks) : std::string(), schedule_name(p), accum,
             100.0 * schedule_bubble(config, layout), stages, where);
  if (p.first_stage_layers > 0 || p.last_stage_layers > 0)
    fmt::print(out, "kiln: uneven pipeline split: parallel.first_stage_layers={}, "
                     "parallel.last_stage_layers={}\n",
               p.first_stage_layers, p.last_stage_layers);
}

}  // namespace

void Trainer::print_start(const std::string& data_notes) {
  const ModelConfig& m = config_.model;
  const TrainConfig& t = config_.train;
  const Ops& ops = backend_->ops();
  const int accum = steps_->micro_batches();
  // Each pipeline stage holds its own layers' parameters.
  // Under LoRA the model's parameters are its frozen base's too; the adapters alone train.
  double parameters = static_cast<double>(model_->parameters().whole_count(true));
  double trained = static_cast<double>(model_->parameters().whole_count());
  backend_->pipeline_group().all_reduce(Tensor{&parameters, DType::F64, {1}}, ReduceOp::Sum);
  backend_->pipeline_group().all_reduce(Tensor{&trained, DType::F64, {1}}, ReduceOp::Sum);
  fmt::print(out_, "kiln: {} model, {} layers, d_model {}, {} heads ({} kv), {:.2f}M parameters, "
                   "vocab {} (padded {}), seq_len {}\n",
             m.arch, m.n_layer, m.d_model, m.n_head, m.kv_heads(), parameters / 1e6, m.vocab_size,
             m.padded_vocab(), m.seq_len);
  if (m.latent_attention())
    fmt::print(out_, "kiln: multi-head latent attention: keys and values from a latent of {}, queries from {}; "
                     "query and key heads {} + {} turned by RoPE (the keys' turned part one for every head), "
                     "value heads {}\n",
               m.kv_lora_rank, m.q_lora_rank > 0 ? fmt::format("a latent of {}", m.q_lora_rank) : "the input",
               m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim);
  if (m.mtp_depth > 0)
    fmt::print(out_, "kiln: multi-token prediction: {} module{} after layer {}, predicting up to {} tokens ahead, "
                     "loss weight {:g}\n",
               m.mtp_depth, m.mtp_depth > 1 ? "s" : "", m.n_layer - 1, m.mtp_depth + 1, m.mtp_loss_weight);
  if (m.lora.enabled())
    fmt::print(out_, "kiln: LoRA rank {} (alpha {:g}, scale {:g}) beside {}: {:.2f}M parameters train ({:.2f}% of the "
                     "model), the base frozen\n",
               m.lora.rank, m.lora.alpha, m.lora.scale(), m.lora.targets, trained / 1e6, 100.0 * trained / parameters);
  if (m.moe.enabled()) {
    int moe_layers = 0;
    for (int l = 0; l < m.block_count(); ++l) moe_layers += m.moe.is_moe_layer(l);
    const MoeConfig& e = m.moe;
    fmt::print(out_, "kiln: mixture of experts in {} of {} layers{}: {} experts of width {}, top {} "
                     "({} scores{}{}{}){}, {}; {:.2f}M parameters active per token\n",
               moe_layers, m.block_count(), m.mtp_depth > 0 ? " (the multi-token prediction modules' blocks among them)" : "",
               e.num_experts, m.expert_ffn_dim(), e.top_k, e.score,
               e.normalize_top_k ? ", normalised" : "",
               e.gate_scale != 1.0 ? fmt::format(", gates x{:g}", e.gate_scale) : "",
               e.route_groups_topk < e.route_groups
                   ? fmt::format(", from {} of {} groups", e.route_groups_topk, e.route_groups)
                   : "",
               e.shared_experts > 0 ? fmt::format(", {} shared", e.shared_experts) : "",
               e.capacity_factor > 0 ? fmt::format("capacity factor {:g}, drops by {}{}", e.capacity_factor,
                                                   e.drop_policy, e.pad_to_capacity ? ", padded" : "")
                                     : "dropless",
               static_cast<double>(flops_parameter_count(m)) / 1e6);
  }
  fmt::print(out_, "kiln: {}, {}; global batch {} = {} micro-batches of {}{}, {} tokens a step, {} "
                   "steps\n",
             ops.name(), precision_text(config_.precision, ops.device()), t.global_batch, accum,
             t.micro_batch,
             layout_.dp() > 1 ? fmt::format(" on each of {} data-parallel ranks", layout_.dp())
                                : std::string(),
             static_cast<int64_t>(t.global_batch) * m.seq_len, t.steps);
  backend_->place_ranks();
  // On the CPU attention is always kiln's and there are no graphs; a GPU says what
  // backend.attention chose and whether its step is replayed as a CUDA graph.
  if (ops.device() == Device::Cuda) {
    const std::string attention = ops.attention();
    const bool resets_on_kiln = config_.data.reset_attention_mask && attention.rfind("cuDNN", 0) == 0;
    fmt::print(out_, "kiln: attention (backend.attention={}): {}{}\n", config_.backend.attention,
               attention,
               resets_on_kiln ? "; rows with document resets (data.reset_attention_mask) run "
                                "kiln's kernels"
                              : "");
    if (const DeviceStep* device_step = steps_->device_step())
      fmt::print(out_, "kiln: CUDA graphs (train.cuda_graphs=true): the whole step is captured after {} warm-up "
                       "steps and replayed ({} of page-locked staging, {} for the losses)\n",
                 kGraphWarmupSteps, human_bytes(device_step->staging_bytes()), human_bytes(device_step->device_bytes()));
    else
      fmt::print(out_, "kiln: CUDA graphs: not used ({})\n", steps_->graphs_why_not());
  }
  if (layout_.tp() > 1)
    fmt::print(out_, "kiln: tensor-parallel over {} ranks: each holds {} of {} heads, {} of {} "
                     "hidden units and {} of {} vocabulary rows{}\n",
               layout_.tp(), m.n_head / layout_.tp(), m.n_head, m.ffn_dim() / layout_.tp(),
               m.ffn_dim(), m.padded_vocab() / layout_.tp(), m.padded_vocab(),
               config_.parallel.sequence_parallel
                   ? fmt::format(", and {} of {} tokens a sequence between them (sequence "
                                 "parallel)",
                                 m.seq_len / layout_.tp(), m.seq_len)
                   : std::string());
  if (layout_.cp() > 1)
    fmt::print(out_, "kiln: context-parallel groups of {}: each rank holds chunks {} and {} of the {} of every "
                     "sequence ({} of {} tokens) and passes its keys and values around the ring for "
                     "attention; the {} data- and context-parallel ranks sum the gradients\n",
               layout_.cp(), coordinates_.cp, 2 * layout_.cp() - 1 - coordinates_.cp, 2 * layout_.cp(),
               m.seq_len / layout_.cp(), m.seq_len, layout_.cp() * layout_.dp());
  if (layout_.pp() > 1) print_pipeline(out_, config_, layout_, accum);
  const bool whole_experts = layout_.whole_experts();
  const std::string expert_ranks = whole_experts
      ? fmt::format("the {} tensor and data-parallel ranks of a stage (whole experts, parallel.etp=1)",
                    layout_.tp() * layout_.dp())
      : fmt::format("the {} data-parallel ranks", layout_.dp());
  const std::string expert_replicas =
      layout_.edp() > 1 ? fmt::format("; the {} {} that hold the same experts sum their gradients",
                                      layout_.edp(), whole_experts ? "ranks" : "replicas")
                        : std::string();
  if (layout_.ep() > 1)
    fmt::print(out_, "kiln: expert-parallel groups of {} among {}: each rank holds {} of {} experts "
                     "a layer and trades tokens with its group by all-to-all{}\n",
               layout_.ep(), expert_ranks, m.moe.num_experts / layout_.ep(), m.moe.num_experts,
               expert_replicas);
  else if (whole_experts)
    fmt::print(out_, "kiln: every expert whole on each of {}, which routes its own tokens{}\n",
               expert_ranks, expert_replicas);
  fmt::print(out_, "{}kiln: data {}\n", data_notes, data_->train().describe());
  if (const SampleSource* valid = data_->valid()) fmt::print(out_, "kiln: data {}\n", valid->describe());
  std::string memory = "kiln: memory";
  size_t total = optimizer_->bytes();
  for (const ArenaSize& a : model_->memory()) {
    memory += fmt::format(" {} {} |", a.name, human_bytes(a.bytes));
    total += a.bytes;
  }
  fmt::print(out_, "{} optimizer {} | total {}\n", memory, human_bytes(optimizer_->bytes()),
             human_bytes(total));
  if (own_plan_) print_plan(out_, *own_plan_, world_.rank());
  const ParameterSet& params = model_->parameters();
  const int gradient_ranks = layout_.cp() * layout_.dp(), shard_ranks = backend_->shard_group().size();
  // HSDP: the shard groups and their copies.
  const std::string replicas =
      layout_.replicates_shards()
          ? fmt::format(" (shard groups of {} of the {} ranks, {} copies summing their gradients)", shard_ranks,
                        gradient_ranks, gradient_ranks / shard_ranks)
          : "";
  if (!params.units().empty()) {
    const ParallelConfig& p = config_.parallel;
    const int n = params.unit_shards();
    const std::string blocks =
        p.shard_per_step ? "every unit gathered and reduced once a step, kept whole for it"
        : params.values_sharded()
            ? fmt::format("each block gathered before its forward and its backward ({}), its gradients "
                          "reduced as its backward ends",
                          p.shard_prefetch ? "the next one's started meanwhile" : "without prefetch")
            : "each block's gradients reduced as its backward ends";
    const auto held = [&](UnitHold hold) {
      return std::any_of(params.units().begin(), params.units().end(),
                         [&](const ParameterUnit& u) { return u.hold == hold; });
    };
    const std::string ends =
        held(UnitHold::Ends)
            ? params.values_sharded()
                  ? "; the embeddings and the head likewise, in one window between them"
                  : "; the embeddings' and the head's likewise, in one window between them"
        : held(UnitHold::Step) && !p.shard_per_step ? "; the embeddings and the tied head kept whole for the step"
                                                    : "";
    const int expert_shards = params.unit_shards(UnitPart::Experts);
    const bool experts = std::any_of(params.units().begin(), params.units().end(),
                                     [](const ParameterUnit& u) { return u.has(UnitPart::Experts); });
    const std::string expert_part =
        experts ? fmt::format("; each block's experts with it, 1/{} of them on each of the {} ranks that hold the "
                              "same experts",
                              expert_shards, expert_shards)
                : "";
    fmt::print(out_, "kiln: sharded data parallelism (parallel.shard={}): each of {} ranks keeps 1/{} of the "
                     "{}gradients and the optimizer state{}, in {} units; {}{}{}\n",
               p.shard, n, n, params.values_sharded() ? "parameters, " : "", replicas, params.units().size(),
               blocks, ends, expert_part);
  } else if (optimizer_->sharded()) {
    fmt::print(out_, "kiln: distributed optimizer: each of {} data-parallel ranks keeps 1/{} of "
                     "the optimizer state{}{}\n",
               shard_ranks, shard_ranks, replicas,
               layout_.ep() > 1 ? fmt::format(" (of its experts' state 1/{})", layout_.edp()) : "");
  }
  if (config_.train.recompute != "none")
    fmt::print(out_, "kiln: recomputing {} in backward (train.recompute={})\n",
               config_.train.recompute == "full" ? "each block from its input"
                                                 : "the attention core",
               config_.train.recompute);

}

void Trainer::print_product_tuning() {
  // Nothing on the CPU: its BLAS has one algorithm a product.
  const std::string tuning = backend_->ops().product_tuning();
  if (!tuning.empty()) fmt::print(out_, "kiln: matrix products: {}\n", tuning);
}

}  // namespace kiln
