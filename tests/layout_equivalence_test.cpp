// The equivalence suite: every parallel layout and memory option trains the single-rank loss
// curve (fp32 sums in another order only: 1e-4 relative; a real bug shows as 1e-2 or more),
// and a checkpoint written under one layout resumes under another on that same curve.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tests/corpus_fixture.h"
#include "tests/relative_error.h"
#include "tests/run_command.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/memory/host_copy.h"

namespace kiln::test {
namespace {

struct Layout {
  std::string name;
  int ranks = 1;
  std::string settings;  // --set overrides of the layout
  std::string model;     // --set overrides of the model, for the layout and its reference
};

// Test names and failure messages show the layout's name, not its bytes.
void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name; }

// Llama's grouped-query heads, SwiGLU and untied output layer, small.
const std::string kLlama =
    " --set model.arch=llama --set model.n_kv_head=2 --set model.d_ff=48";

// Qwen3's normalised query and key heads, with a head width of their own (12, not 32 / 4).
const std::string kQwen3 = kLlama + " --set model.qk_norm=true --set model.head_dim=12";

// DeepSeek's latent attention on Llama: 4 heads of 6 + 2 turned by RoPE, values of 5, latents
// of 12 and 8.
const std::string kLatent = " --set model.arch=llama --set model.d_ff=48 --set model.attention=mla"
                            " --set model.q_lora_rank=12 --set model.kv_lora_rank=8 --set model.qk_nope_head_dim=6"
                            " --set model.qk_rope_head_dim=2 --set model.v_head_dim=5";

// DeepSeek-V3's shape in small: latent attention, layer 0 dense, layer 1 of eight
// sigmoid-scored experts in two groups (each token's two from its better group, gates scaled
// by 2.5) and a shared expert.
const std::string kDeepSeekV3 = kLatent +
    " --set model.n_layer=2 --set moe.dense_layers=1 --set moe.num_experts=8 --set moe.top_k=2"
    " --set moe.ffn_hidden=24 --set moe.score=sigmoid --set moe.route_groups=2 --set moe.route_groups_topk=1"
    " --set moe.shared_experts=1 --set moe.bias_update_rate=0.001 --set moe.gate_scale=2.5";

// ... with DeepSeek-V3's multi-token prediction: one module, whose block (layer 2 of the
// placement) has the experts.
const std::string kDeepSeekV3Mtp = kDeepSeekV3 + " --set model.mtp_depth=1 --set model.mtp_loss_weight=0.3";
// Two modules on Llama with a tied embedding, the modules' input and head the same weight.
const std::string kLlamaMtp2Tied = kLlama + " --set model.mtp_depth=2 --set model.tie_embeddings=true";

// Llama with a mixture of experts in both layers, every balancing option on.
const std::string kMoe = kLlama +
    " --set moe.num_experts=4 --set moe.top_k=2 --set moe.ffn_hidden=24 --set moe.z_loss_coeff=0.001"
    " --set moe.bias_update_rate=0.001";
// DeepSeek-V3's routing on Llama: layer 0 dense, layer 1 of eight sigmoid-scored experts in
// two groups, each token's two from its better group, gates scaled by 2.5, a shared expert.
const std::string kMoeDeepSeek = kLlama +
    " --set model.n_layer=2 --set moe.dense_layers=1 --set moe.num_experts=8 --set moe.top_k=2"
    " --set moe.ffn_hidden=24 --set moe.score=sigmoid --set moe.route_groups=2 --set moe.route_groups_topk=1"
    " --set moe.shared_experts=1 --set moe.bias_update_rate=0.001 --set moe.gate_scale=2.5";
// GPT-2 experts (layer 0 only) with a capacity that drops choices, and a shared expert.
const std::string kMoeCapacity =
    " --set moe.num_experts=4 --set moe.top_k=2 --set moe.layer_freq=2 --set moe.shared_experts=1"
    " --set moe.capacity_factor=1.0 --set moe.drop_policy=position";
// GPT-2 experts (layer 0 only) and a shared expert, dropless.
const std::string kMoeShared =
    " --set moe.num_experts=4 --set moe.top_k=2 --set moe.layer_freq=2 --set moe.shared_experts=1";
// Megatron's document resets: positions restart and attention stops at each document's end,
// whose token takes no loss.
const std::string kDocuments =
    " --set data.reset_position_ids=true --set data.reset_attention_mask=true --set data.eod_mask_loss=true";
// LoRA: the base frozen, adapters beside every Llama projection (split as their layers
// are), or beside GPT-2's query and value parts of its fused qkv, its output projection and
// both MLP layers (the GELU between them).
const std::string kLoraLlama = kLlama +
    " --set finetune.lora.rank=4 --set finetune.lora.alpha=8 --set finetune.lora.targets=q,k,v,o,gate,up,down";
const std::string kLoraGpt2 =
    " --set finetune.lora.rank=4 --set finetune.lora.alpha=8 --set finetune.lora.targets=q,v,o,fc,down";
// LoRA's dropout, a large one: each layout must draw the single rank's masks (by sample
// number, place in the sequence and global feature), and a mask drawn apart moves the curve
// (LoraDropoutCurve below).
const std::string kLoraDropout = " --set finetune.lora.dropout=0.3";
// Micro-batches of one sample, for DualPipeV's 2 pp micro-batches a rank (the validation,
// eval_iters micro-batches, shrinks with them: the reference runs them too).
const std::string kOneSample = " --set train.micro_batch=1";
// Whole experts (parallel.etp=1) under tensor and sequence parallelism.
const std::string kWholeExperts =
    " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.etp=1";

// A 2-layer model, so every layout has layers to split, trained 20 steps with a loss printed
// at each and a validation at steps 10 and 20.
std::string equivalence_run(const std::string& prefix) {
  return " train --no-store" + small_run(prefix) +
         " --set model.n_layer=2 --set model.n_head=4 --set train.global_batch=8"
         " --set train.steps=20 --set train.log_interval=1 --set train.eval_interval=10"
         " --set train.sample_tokens=0";
}

class LayoutEquivalence : public testing::TestWithParam<Layout> {
 protected:
  static void SetUpTestSuite() {
    dir_ = fresh_dir("layout_equivalence");
    prefix_ = prepare_corpus(dir_);
  }
  // The single-rank curve of a model (its losses and its gradient norms), trained once for
  // all the layouts that share it.
  struct Curve {
    std::vector<double> losses, grad_norms;
  };
  static const Curve& single_rank(const std::string& model) {
    auto [it, fresh] = single_.try_emplace(model);
    if (fresh) {
      const CommandResult single = run_command(kiln + equivalence_run(prefix_) + model);
      EXPECT_EQ(single.exit_code, 0) << single.output;
      it->second = {printed_losses(single.output), printed_grad_norms(single.output)};
      EXPECT_EQ(it->second.losses.size(), 22u) << single.output;  // 20 steps, 2 validations
      EXPECT_EQ(it->second.grad_norms.size(), 20u) << single.output;
    }
    return it->second;
  }
  void SetUp() override {
#ifndef KILN_HAVE_MPI
    if (GetParam().ranks > 1) GTEST_SKIP() << "skipped: built without MPI";
#endif
  }
  static std::string launch(int ranks) { return ranks > 1 ? mpirun_command(ranks) + kiln : kiln; }
  static bool near(double got, double want) {
    return std::abs(got - want) <= 1e-4 * want + 5e-5;
  }

  static inline std::string dir_, prefix_;
  static inline std::map<std::string, Curve> single_;
};

TEST_P(LayoutEquivalence, TrainsTheSingleRankCurve) {
  const Layout& layout = GetParam();
  const Curve& want = single_rank(layout.model);
  ASSERT_EQ(want.losses.size(), 22u);
  const CommandResult r = run_command(launch(layout.ranks) + equivalence_run(prefix_) +
                                      layout.model + layout.settings);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> got = printed_losses(r.output);
  ASSERT_EQ(got.size(), want.losses.size()) << r.output;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(near(got[i], want.losses[i])) << "loss " << i << ": " << got[i] << " vs " << want.losses[i];
  // The gradient norm (which clipping reads) summed over the right ranks: printed to three
  // places, so within one in the last place, beyond the losses' relative tolerance.
  const std::vector<double> norms = printed_grad_norms(r.output);
  ASSERT_EQ(norms.size(), want.grad_norms.size()) << r.output;
  for (size_t i = 0; i < norms.size(); ++i)
    EXPECT_LE(std::abs(norms[i] - want.grad_norms[i]), 1e-3 + 1e-4 * want.grad_norms[i])
        << "grad norm at step " << i + 1 << ": " << norms[i] << " vs " << want.grad_norms[i];
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LayoutEquivalence,
    testing::Values(
        Layout{"distributed_optimizer_dp2", 2, " --set parallel.distributed_optimizer=true", ""},
        Layout{"shard_optimizer_dp4", 4, " --set parallel.shard=optimizer", ""},
        Layout{"shard_gradients_dp4", 4, " --set parallel.shard=gradients", ""},
        Layout{"shard_parameters_dp4", 4, " --set parallel.shard=parameters", ""},
        Layout{"shard_gradients_dp2", 2, " --set parallel.shard=gradients", ""},
        // HSDP: two shard groups of two, each a copy, their shards summed across.
        Layout{"shard_parameters_dp4_shard_group2", 4, " --set parallel.shard=parameters --set parallel.shard_group=2",
               ""},
        Layout{"shard_optimizer_dp4_shard_group2", 4, " --set parallel.shard=optimizer --set parallel.shard_group=2", ""},
        Layout{"llama_cp2_dp2_shard_gradients_shard_group2", 4,
               " --set parallel.cp=2 --set parallel.shard=gradients --set parallel.shard_group=2", kLlama},
        Layout{"shard_parameters_dp2_recompute_full", 2, " --set parallel.shard=parameters --set train.recompute=full",
               ""},
        Layout{"llama_tp2_sequence_parallel_dp2_shard_parameters", 4,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.shard=parameters", kLlama},
        Layout{"pp2_dp2_shard_parameters", 4, " --set parallel.pp=2 --set parallel.shard=parameters", ""},
        Layout{"pp2_vpp2_dp2_shard_parameters_per_step", 4,
               " --set parallel.pp=2 --set parallel.vpp=2 --set parallel.shard=parameters --set parallel.shard_per_step=true",
               " --set model.n_layer=4"},
        Layout{"shard_parameters_dp4_no_prefetch", 4, " --set parallel.shard=parameters --set parallel.shard_prefetch=false",
               ""},
        Layout{"llama_cp2_dp2_shard_parameters", 4, " --set parallel.cp=2 --set parallel.shard=parameters", kLlama},
        // Llama's untied head and its embeddings each gathered where it is read and reduced as
        // its backward ends, taking one window in turn (on one stage) or each its own stage's.
        Layout{"llama_shard_gradients_dp4", 4, " --set parallel.shard=gradients", kLlama},
        Layout{"llama_pp2_dp2_shard_parameters", 4, " --set parallel.pp=2 --set parallel.shard=parameters", kLlama},
        Layout{"moe_dp2_shard_parameters", 2, " --set parallel.shard=parameters", kMoe},
        // Each block's experts a part of its unit, sharded over the 2 ranks that hold them.
        Layout{"moe_ep2_dp4_shard_parameters", 4, " --set parallel.ep=2 --set parallel.shard=parameters", kMoe},
        // HSDP under ep2: the copies hold the same dense shards but different experts'.
        Layout{"moe_ep2_dp4_shard_parameters_shard_group2", 4,
               " --set parallel.ep=2 --set parallel.shard=parameters --set parallel.shard_group=2", kMoe},
        Layout{"moe_ep2_dp4_shard_optimizer_shard_group2", 4,
               " --set parallel.ep=2 --set parallel.shard=optimizer --set parallel.shard_group=2", kMoe},
        // ep2 over 2 ranks: each expert on one rank alone, its part of the unit a shard of one.
        Layout{"moe_ep2_shard_gradients", 2, " --set parallel.ep=2 --set parallel.shard=gradients", kMoe},
        Layout{"moe_tp2_ep2_shard_gradients", 4, " --set parallel.tp=2 --set parallel.ep=2 --set parallel.shard=gradients",
               kMoe},
        Layout{"recompute_full", 1, " --set train.recompute=full", ""},
        Layout{"recompute_selective_dp2", 2, " --set train.recompute=selective", ""},
        Layout{"tp2", 2, " --set parallel.tp=2", ""},
        Layout{"llama_tp2", 2, " --set parallel.tp=2", kLlama},
        // Qwen2's query, key and value biases, split over the ranks as their weight rows are.
        Layout{"qwen2_tp2", 2, " --set parallel.tp=2", kLlama + " --set model.attention_bias=true"},
        // Qwen3's q_norm and k_norm are whole on every rank and see only its heads (and,
        // with sequence parallelism, every token): their gradients are summed over the ranks.
        Layout{"qwen3_tp2", 2, " --set parallel.tp=2", kQwen3},
        Layout{"qwen3_tp2_sequence_parallel_recompute_full", 2,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set train.recompute=full", kQwen3},
        Layout{"qwen3_cp2_tp2_sequence_parallel_recompute_selective", 4,
               " --set parallel.cp=2 --set parallel.tp=2 --set parallel.sequence_parallel=true"
               " --set train.recompute=selective",
               kQwen3},
        Layout{"qwen3_pp2", 2, " --set parallel.pp=2", kQwen3},
        // Latent attention: each tensor rank's heads, the latents whole on both, their
        // weights' and the input's gradients summed over the ranks.
        Layout{"latent_tp2_sequence_parallel_dp2", 4, " --set parallel.tp=2 --set parallel.sequence_parallel=true",
               kLatent},
        // Ring attention over the padded heads, RoPE at each chunk's places in the sequence.
        Layout{"latent_cp2_tp2_sequence_parallel", 4,
               " --set parallel.cp=2 --set parallel.tp=2 --set parallel.sequence_parallel=true", kLatent + kDocuments},
        Layout{"deepseek_v3_tp2", 2, " --set parallel.tp=2", kDeepSeekV3},
        Layout{"deepseek_v3_tp2_sequence_parallel_pp2", 4,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.pp=2", kDeepSeekV3},
        // Multi-token prediction: the module on the last stage with its copy of the embedding,
        // its projections whole on each tensor rank (each projecting its own tokens under
        // sequence parallelism), its experts split as the layers' are.
        Layout{"deepseek_v3_mtp_tp2_sequence_parallel", 2, " --set parallel.tp=2 --set parallel.sequence_parallel=true",
               kDeepSeekV3Mtp},
        Layout{"deepseek_v3_mtp_ep2_dp2", 4, " --set parallel.ep=2", kDeepSeekV3Mtp},
        Layout{"deepseek_v3_mtp_pp2", 2, " --set parallel.pp=2", kDeepSeekV3Mtp},
        Layout{"llama_mtp2_tied_tp2_pp2_recompute_full", 4,
               " --set parallel.tp=2 --set parallel.pp=2 --set train.recompute=full", kLlamaMtp2Tied},
        Layout{"llama_mtp2_tied_dp2_shard_parameters", 2, " --set parallel.shard=parameters", kLlamaMtp2Tied},
        Layout{"latent_tp2_pp2_zbv_recompute_full", 4,
               " --set parallel.tp=2 --set parallel.pp=2 --set parallel.schedule=zbv --set train.recompute=full",
               kLatent + " --set model.n_layer=4"},
        Layout{"tp2_sequence_parallel", 2,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true", ""},
        Layout{"llama_tp2_sequence_parallel_recompute_full", 2,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true"
               " --set train.recompute=full",
               kLlama},
        Layout{"pp2", 2, " --set parallel.pp=2", ""},
        Layout{"moe_dp2", 2, "", kMoe},
        Layout{"moe_pp2_dp2_distributed_optimizer", 4,
               " --set parallel.pp=2 --set parallel.distributed_optimizer=true", kMoe},
        Layout{"moe_capacity_dp2_recompute_full", 2, " --set train.recompute=full", kMoeCapacity},
        // Expert parallelism: each rank holds half (or a quarter) of the experts and trades
        // tokens; with dp4 the replicas holding the same experts sum their gradients.
        Layout{"moe_ep2", 2, " --set parallel.ep=2", kMoe},
        Layout{"moe_ep2_dp4", 4, " --set parallel.ep=2 --set parallel.ddp_bucket_size=5000", kMoe},
        Layout{"moe_ep4_distributed_optimizer", 4,
               " --set parallel.ep=4 --set parallel.distributed_optimizer=true", kMoe},
        Layout{"moe_pp2_ep2_distributed_optimizer", 4,
               " --set parallel.pp=2 --set parallel.ep=2 --set parallel.distributed_optimizer=true",
               kMoe},
        Layout{"moe_capacity_ep2_recompute_full", 2,
               " --set parallel.ep=2 --set train.recompute=full", kMoeCapacity},
        // Device-limited routing: with a group an expert-parallel rank's experts, each token's
        // rows all go to one rank.
        Layout{"moe_deepseek_routing_ep2", 2, " --set parallel.ep=2", kMoeDeepSeek},
        // Tensor parallelism: every expert's hidden units split as a dense MLP's.
        Layout{"moe_tp2", 2, " --set parallel.tp=2", kMoe},
        Layout{"moe_tp2_sequence_parallel_dp2", 4,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true", kMoe},
        // Both: each rank holds half the hidden units of half the experts.
        Layout{"moe_tp2_ep2", 4, " --set parallel.tp=2 --set parallel.ep=2", kMoe},
        // Context parallelism: ring attention over 2 or 4 ranks, learned positions and RoPE,
        // with and without document resets, and with tensor, sequence, pipeline and data
        // parallelism and the distributed optimizer.
        Layout{"cp2", 2, " --set parallel.cp=2", ""},
        Layout{"cp2_documents", 2, " --set parallel.cp=2", kDocuments},
        Layout{"llama_cp4", 4, " --set parallel.cp=4", kLlama},
        Layout{"llama_cp4_documents_recompute_selective", 4, " --set parallel.cp=4 --set train.recompute=selective",
               kLlama + kDocuments},
        Layout{"llama_cp2_tp2_sequence_parallel", 4,
               " --set parallel.cp=2 --set parallel.tp=2 --set parallel.sequence_parallel=true", kLlama},
        Layout{"cp2_tp2_documents", 4, " --set parallel.cp=2 --set parallel.tp=2", kDocuments},
        Layout{"llama_cp2_pp2_dp2_distributed_optimizer", 8,
               " --set parallel.cp=2 --set parallel.pp=2 --set parallel.distributed_optimizer=true", kLlama},
        Layout{"cp2_pp2_dp2_documents", 8, " --set parallel.cp=2 --set parallel.pp=2 --set parallel.ddp_bucket_size=5000",
               kDocuments},
        // Whole experts: the expert group spans the tensor ranks (ep2 on 2 ranks), or each
        // tensor rank holds every expert and the whole stage sums their gradients.
        Layout{"moe_tp2_sequence_parallel_etp1_ep2", 2, kWholeExperts + " --set parallel.ep=2", kMoe},
        Layout{"moe_tp2_sequence_parallel_etp1_dp2", 4, kWholeExperts, kMoe},
        // No data parallelism, yet the two tensor ranks' experts are replicas to sum.
        Layout{"moe_tp2_sequence_parallel_etp1", 2, kWholeExperts, kMoe},
        Layout{"moe_shared_tp2_sequence_parallel_etp1_ep4_distributed_optimizer", 4,
               kWholeExperts + " --set parallel.ep=4 --set parallel.distributed_optimizer=true", kMoeShared},
        Layout{"moe_capacity_tp2_sequence_parallel_ep2_distributed_optimizer", 4,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.ep=2"
               " --set parallel.distributed_optimizer=true",
               kMoeCapacity},
        Layout{"moe_capacity_tp2_sequence_parallel_recompute_full", 2,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set train.recompute=full",
               kMoeCapacity},
        Layout{"pp2_vpp2_interleaved", 2, " --set parallel.pp=2 --set parallel.vpp=2",
               " --set model.n_layer=4"},
        // Round a ring of 4 stages: each transfer is matched on its channel by order alone.
        Layout{"pp4_vpp2_interleaved", 4, " --set parallel.pp=4 --set parallel.vpp=2",
               " --set model.n_layer=8"},
        // ZB-H1: each backward split in the input's gradient and the weights', the latter
        // run later from the copies the former kept.
        Layout{"pp2_zb_h1", 2, " --set parallel.pp=2 --set parallel.schedule=zb-h1", ""},
        Layout{"llama_pp4_uneven_zb_h1", 4,
               " --set parallel.pp=4 --set parallel.schedule=zb-h1 --set parallel.first_stage_layers=2"
               " --set parallel.last_stage_layers=1",
               kLlama + " --set model.n_layer=7"},
        // Small buckets: their reductions start one by one in the last micro-batch's weight pass.
        Layout{"pp2_dp2_zb_h1", 4, " --set parallel.pp=2 --set parallel.schedule=zb-h1 --set parallel.ddp_bucket_size=5000",
               ""},
        Layout{"pp2_dp2_distributed_optimizer_zb_h1", 4,
               " --set parallel.pp=2 --set parallel.schedule=zb-h1 --set parallel.distributed_optimizer=true", ""},
        Layout{"llama_tp2_sequence_parallel_pp2_zb_h1_recompute_full", 4,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.pp=2"
               " --set parallel.schedule=zb-h1 --set train.recompute=full",
               kLlama},
        Layout{"moe_ep2_pp2_zb_h1", 4, " --set parallel.ep=2 --set parallel.pp=2 --set parallel.schedule=zb-h1", kMoe},
        // The V schedules: two chunks a stage, the last stage handing its first chunk's output
        // to its second, and the second's input gradient back, in the slot.
        Layout{"pp2_zbv", 2, " --set parallel.pp=2 --set parallel.schedule=zbv", " --set model.n_layer=4"},
        Layout{"llama_pp4_uneven_zbv", 4,
               " --set parallel.pp=4 --set parallel.schedule=zbv --set parallel.first_stage_layers=2"
               " --set parallel.last_stage_layers=1",
               kLlama + " --set model.n_layer=9"},
        Layout{"pp2_dp2_zbv", 4, " --set parallel.pp=2 --set parallel.schedule=zbv --set parallel.ddp_bucket_size=5000",
               " --set model.n_layer=4"},
        Layout{"llama_tp2_sequence_parallel_pp2_zbv_recompute_full", 4,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.pp=2"
               " --set parallel.schedule=zbv --set train.recompute=full",
               kLlama + " --set model.n_layer=4"},
        Layout{"moe_ep2_pp2_zbv", 4, " --set parallel.ep=2 --set parallel.pp=2 --set parallel.schedule=zbv",
               kMoe + " --set model.n_layer=4"},
        Layout{"llama_cp2_pp2_zbv", 4, " --set parallel.cp=2 --set parallel.pp=2 --set parallel.schedule=zbv",
               kLlama + " --set model.n_layer=4"},
        // The weight pass sums what tensor ranks share: the head norms' weights, the router's
        // under sequence parallelism, the shared expert's bias added once.
        Layout{"qwen3_tp2_pp2_zb_h1", 4, " --set parallel.tp=2 --set parallel.pp=2 --set parallel.schedule=zb-h1",
               kQwen3},
        Layout{"moe_shared_tp2_sequence_parallel_etp1_pp2_zbv", 4,
               kWholeExperts + " --set parallel.pp=2 --set parallel.schedule=zbv", kMoeShared + " --set model.n_layer=4"},
        Layout{"pp2_dualpipev", 2, " --set parallel.pp=2 --set parallel.schedule=dualpipev", " --set model.n_layer=4"},
        Layout{"llama_cp2_pp2_dualpipev", 4, " --set parallel.cp=2 --set parallel.pp=2 --set parallel.schedule=dualpipev",
               kLlama + " --set model.n_layer=4"},
        Layout{"llama_pp4_uneven_dualpipev", 4,
               " --set parallel.pp=4 --set parallel.schedule=dualpipev --set parallel.first_stage_layers=2"
               " --set parallel.last_stage_layers=1",
               kLlama + " --set model.n_layer=9" + kOneSample},
        Layout{"pp2_dp2_distributed_optimizer_dualpipev", 4,
               " --set parallel.pp=2 --set parallel.schedule=dualpipev --set parallel.distributed_optimizer=true",
               " --set model.n_layer=4" + kOneSample},
        Layout{"llama_tp2_sequence_parallel_pp2_dualpipev", 4,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.pp=2"
               " --set parallel.schedule=dualpipev",
               kLlama + " --set model.n_layer=4"},
        Layout{"moe_ep2_pp2_dualpipev", 4,
               " --set parallel.ep=2 --set parallel.pp=2 --set parallel.schedule=dualpipev",
               kMoe + " --set model.n_layer=4" + kOneSample},
        Layout{"llama_pp2_uneven_recompute_selective", 2,
               " --set parallel.pp=2 --set parallel.first_stage_layers=1"
               " --set parallel.last_stage_layers=2 --set train.recompute=selective",
               kLlama + " --set model.n_layer=3"},
        // Small buckets: their reductions start one by one during the pipeline's cool-down.
        Layout{"tp2_pp2_dp2", 8,
               " --set parallel.tp=2 --set parallel.pp=2 --set parallel.ddp_bucket_size=5000", ""},
        Layout{"tp2_sequence_parallel_pp2_dp2_distributed_optimizer_recompute_full", 8,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.pp=2"
               " --set parallel.distributed_optimizer=true --set train.recompute=full",
               ""},
        Layout{"llama_tp2_dp2_distributed_optimizer_recompute_full", 4,
               " --set parallel.tp=2 --set parallel.distributed_optimizer=true"
               " --set train.recompute=full",
               kLlama},
        Layout{"llama_lora_tp2", 2, " --set parallel.tp=2", kLoraLlama},
        Layout{"llama_lora_tp2_sequence_parallel_recompute_full", 2,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set train.recompute=full", kLoraLlama},
        Layout{"lora_tp2_sequence_parallel", 2, " --set parallel.tp=2 --set parallel.sequence_parallel=true",
               kLoraGpt2},
        // The tied embedding's copy on the last stage is frozen as the first's is.
        Layout{"lora_pp2", 2, " --set parallel.pp=2", kLoraGpt2},
        Layout{"llama_lora_dp2_distributed_optimizer", 2, " --set parallel.distributed_optimizer=true", kLoraLlama},
        // Dropout: the column-parallel layers' ranks draw one mask, the row-parallel ones their
        // features' part of it; the context ranks their chunks'; the replicas and the pipeline's
        // micro-batches their samples'; full recomputation draws forward's again.
        Layout{"llama_lora_dropout_tp2_sequence_parallel_recompute_full", 2,
               " --set parallel.tp=2 --set parallel.sequence_parallel=true --set train.recompute=full",
               kLoraLlama + kLoraDropout},
        Layout{"llama_lora_dropout_cp2", 2, " --set parallel.cp=2", kLoraLlama + kLoraDropout},
        Layout{"llama_lora_dropout_dp2_distributed_optimizer", 2, " --set parallel.distributed_optimizer=true",
               kLoraLlama + kLoraDropout},
        Layout{"lora_dropout_pp2", 2, " --set parallel.pp=2", kLoraGpt2 + kLoraDropout}),
    [](const testing::TestParamInfo<Layout>& info) { return info.param.name; });

// The dropout cases above prove something only if the masks move the curve: the single
// rank's curve with dropout leaves the one without by far more than the suite's tolerance
// (from step 2: B starts at zero, so the first step's loss has no adapter in it), while the
// validations, which drop nothing, differ only through the trained adapters.
TEST(LoraDropoutCurve, LeavesTheCurveWithoutDropout) {
  const std::string dir = fresh_dir("lora_dropout_curve");
  const std::string prefix = prepare_corpus(dir);
  const CommandResult plain = run_command(kiln + equivalence_run(prefix) + kLoraLlama);
  const CommandResult dropped = run_command(kiln + equivalence_run(prefix) + kLoraLlama + kLoraDropout);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(dropped.exit_code, 0) << dropped.output;
  const std::vector<double> a = printed_losses(plain.output), b = printed_losses(dropped.output);
  ASSERT_EQ(a.size(), 22u);
  ASSERT_EQ(b.size(), 22u);
  EXPECT_EQ(a[0], b[0]);
  double widest = 0;
  for (size_t i = 1; i < a.size(); ++i) widest = std::max(widest, std::abs(a[i] - b[i]) / a[i]);
  // Ten times the suite's tolerance (1e-4 relative): a layout whose masks went astray would
  // show as plainly.
  EXPECT_GT(widest, 1e-3) << "dropout moved the curve by " << widest << " at most";
  std::printf("lora dropout curve: %.3e from the curve without dropout, at most\n", widest);
}

class LayoutCheckpoints : public testing::TestWithParam<Layout> {};

TEST_P(LayoutCheckpoints, MoveBetweenOneRankAndMany) {
#ifndef KILN_HAVE_MPI
  GTEST_SKIP() << "skipped: built without MPI";
#endif
  // A checkpoint holds the whole model and optimizer state (a sharded optimizer's shards, a
  // tensor-parallel model's pieces and the pipeline stages' layers gathered), so a run saved
  // on several ranks resumes on 1, and that one's checkpoint resumes on several again, each
  // on the curve of a run that never stopped. (A resumed run takes the checkpoint's config,
  // its layout and pipeline schedule included, unless told otherwise.)
  const Layout& layout = GetParam();
  const std::string dir = fresh_dir("layout_checkpoints_" + layout.name);
  const std::string prefix = prepare_corpus(dir);
  const std::string run = " train --no-store" + small_run(prefix) +
                          " --set train.global_batch=8 --set train.steps=12"
                          " --set train.log_interval=1 --set train.eval_interval=0"
                          " --set train.sample_tokens=0 --set train.checkpoint_interval=4"
                          " --set train.checkpoint_dir=" + dir + "/checkpoints" + layout.model;
  const std::string many_ranks = mpirun_command(layout.ranks) + kiln + run + layout.settings;
  const CommandResult straight = run_command(kiln + run + " --name straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const std::vector<double> want = printed_losses(straight.output);
  ASSERT_EQ(want.size(), 12u);

  const CommandResult two = run_command(many_ranks + " --name two");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const CommandResult one =
      run_command(kiln + run + " --set parallel.tp=1 --set parallel.pp=1 --set parallel.vpp=1"
                  " --set parallel.ep=1 --set parallel.cp=1 --set parallel.shard_group=0 --set parallel.schedule=1f1b"
                  " --name one --resume " + dir +
                  "/checkpoints/two/step-00000004");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const CommandResult back =
      run_command(many_ranks + " --name back --resume " + dir + "/checkpoints/one/step-00000008");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  // two: steps 1-12 on the layout's ranks; one: steps 5-12 on 1 rank; back: steps 9-12 on
  // the layout's ranks again.
  const std::vector<double> a = printed_losses(two.output), b = printed_losses(one.output),
                            c = printed_losses(back.output);
  ASSERT_EQ(a.size(), 12u) << two.output;
  ASSERT_EQ(b.size(), 8u) << one.output;
  ASSERT_EQ(c.size(), 4u) << back.output;
  const auto near = [&](double got, size_t i) {
    return std::abs(got - want[i]) <= 1e-4 * want[i] + 5e-5;
  };
  for (size_t i = 0; i < 12; ++i) EXPECT_TRUE(near(a[i], i)) << layout.ranks << " ranks, step " << i + 1;
  for (size_t i = 4; i < 12; ++i) EXPECT_TRUE(near(b[i - 4], i)) << "resumed on 1, step " << i + 1;
  for (size_t i = 8; i < 12; ++i) EXPECT_TRUE(near(c[i - 8], i)) << "back on " << layout.ranks << ", step " << i + 1;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LayoutCheckpoints,
    testing::Values(Layout{"replicated_dp2", 2, "", ""},
                    Layout{"distributed_optimizer_dp2", 2,
                           " --set parallel.distributed_optimizer=true", ""},
                    Layout{"tp2", 2, " --set parallel.tp=2", ""},
                    // The values gathered whole from their shards for the write, and each
                    // rank's shards taken from the whole on resume.
                    Layout{"shard_parameters_dp4", 4, " --set parallel.shard=parameters", " --set model.n_layer=2"},
                    Layout{"shard_parameters_dp4_shard_group2", 4,
                           " --set parallel.shard=parameters --set parallel.shard_group=2", " --set model.n_layer=2"},
                    Layout{"moe_ep2_dp4_shard_parameters", 4, " --set parallel.ep=2 --set parallel.shard=parameters",
                           " --set model.n_layer=2" + kMoe + " --set moe.bias_update_rate=0.01"},
                    Layout{"llama_tp2_pp2_dp2_shard_parameters", 8,
                           " --set parallel.tp=2 --set parallel.pp=2 --set parallel.shard=parameters",
                           " --set model.n_layer=2" + kLlama},
                    Layout{"pp2_vpp2", 2, " --set parallel.pp=2 --set parallel.vpp=2",
                           " --set model.n_layer=4"},
                    Layout{"pp2_zb_h1", 2, " --set parallel.pp=2 --set parallel.schedule=zb-h1",
                           " --set model.n_layer=2"},
                    Layout{"pp2_zbv", 2, " --set parallel.pp=2 --set parallel.schedule=zbv",
                           " --set model.n_layer=4"},
                    Layout{"tp2_pp2_dp2", 8, " --set parallel.tp=2 --set parallel.pp=2",
                           " --set model.n_layer=2"},
                    // The selection bias moves fast enough to change choices: the resumed
                    // runs stay on the curve only if checkpoints carry it.
                    Layout{"moe_pp2_dp2", 4, " --set parallel.pp=2",
                           " --set model.n_layer=2" + kMoe + " --set moe.bias_update_rate=0.01"},
                    // The experts gathered from an expert group, their moments from shards of
                    // the expert-data-parallel replicas.
                    Layout{"moe_ep2_dp4_distributed_optimizer", 4,
                           " --set parallel.ep=2 --set parallel.distributed_optimizer=true",
                           " --set model.n_layer=2" + kMoe + " --set moe.bias_update_rate=0.01"},
                    Layout{"moe_tp2_sequence_parallel", 2,
                           " --set parallel.tp=2 --set parallel.sequence_parallel=true",
                           " --set model.n_layer=2" + kMoe},
                    Layout{"moe_tp2_ep2_distributed_optimizer", 4,
                           " --set parallel.tp=2 --set parallel.ep=2"
                           " --set parallel.distributed_optimizer=true",
                           " --set model.n_layer=2" + kMoe},
                    // Whole experts gathered over an expert group that spans the tensor
                    // ranks, their moments from the folded expert-data shards.
                    // A context-parallel run's state is every rank's: written by the first,
                    // its moments gathered from shards over the data- and context-parallel ranks.
                    Layout{"llama_cp2_dp2_distributed_optimizer", 4,
                           " --set parallel.cp=2 --set parallel.distributed_optimizer=true",
                           " --set model.n_layer=2" + kLlama},
                    Layout{"moe_shared_tp2_sequence_parallel_etp1_ep2_dp2_distributed_optimizer", 4,
                           kWholeExperts + " --set parallel.ep=2 --set parallel.distributed_optimizer=true",
                           " --set model.n_layer=2" + kMoeShared},
                    // The adapters and their moments, gathered from tensor-parallel pieces;
                    // the frozen base saved beside them.
                    Layout{"llama_lora_tp2", 2, " --set parallel.tp=2", " --set model.n_layer=2" + kLoraLlama},
                    // Qwen3's q_norm and k_norm, whole on every tensor rank, saved once.
                    Layout{"qwen3_tp2", 2, " --set parallel.tp=2", " --set model.n_layer=2" + kQwen3},
                    // Latent attention's up-projections by heads, its down-projection whole.
                    Layout{"latent_tp2_pp2", 4, " --set parallel.tp=2 --set parallel.pp=2",
                           " --set model.n_layer=2" + kLatent},
                    // DeepSeek-V3's shape: the experts (the layers' and the module's) split over
                    // the expert group, the module on the last stage with a copy of the embedding
                    // (saved by the first) and its selection bias (layer 2).
                    Layout{"deepseek_v3_mtp_ep2_pp2_distributed_optimizer", 4,
                           " --set parallel.ep=2 --set parallel.pp=2 --set parallel.distributed_optimizer=true",
                           kDeepSeekV3Mtp}),
    [](const testing::TestParamInfo<Layout>& info) { return info.param.name; });

// After one step each layout holds the single rank's gradients, tensor by tensor: AdamW's
// first moment after one step is (1 - beta1) times the unclipped gradient, and the checkpoint
// stores it under each parameter's name, gathered from the ranks' pieces (tensor and expert
// parallelism) and shards (the distributed optimizer).
class LayoutGradients : public testing::TestWithParam<Layout> {};

std::string one_step(const std::string& prefix, const std::string& dir, const std::string& name) {
  return " train --no-store" + small_run(prefix) +
         " --set model.n_layer=2 --set model.n_head=4 --set train.global_batch=8"
         " --set train.steps=1 --set train.warmup=0 --set train.clip_grad=0"
         " --set train.eval_interval=0 --set train.sample_tokens=0"
         " --set train.checkpoint_interval=1 --set train.checkpoint_dir=" + dir + " --name " + name;
}

// A tensor of a checkpoint file, as doubles.
std::vector<double> values(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo& info = file.info(name);
  return doubles_from_bytes(file.data(name).data(), info.dtype, info.shape.numel());
}

TEST_P(LayoutGradients, MatchTheSingleRankAfterOneStep) {
#ifndef KILN_HAVE_MPI
  GTEST_SKIP() << "skipped: built without MPI";
#endif
  const Layout& layout = GetParam();
  const std::string dir = fresh_dir("layout_gradients_" + layout.name);
  const std::string prefix = prepare_corpus(dir);
  const CommandResult single = run_command(kiln + one_step(prefix, dir, "single") + layout.model);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const CommandResult split = run_command(mpirun_command(layout.ranks) + kiln +
                                          one_step(prefix, dir, "split") + layout.model +
                                          layout.settings);
  ASSERT_EQ(split.exit_code, 0) << split.output;
  const SafetensorsFile want(dir + "/single/step-00000001/optimizer.safetensors");
  const SafetensorsFile got(dir + "/split/step-00000001/optimizer.safetensors");
  int compared = 0;
  for (const TensorInfo& tensor : want.tensors()) {
    if (tensor.name.rfind("exp_avg.", 0) != 0) continue;
    ASSERT_TRUE(got.contains(tensor.name)) << tensor.name;
    const std::vector<double> a = values(got, tensor.name), b = values(want, tensor.name);
    ASSERT_EQ(a.size(), b.size()) << tensor.name;
    EXPECT_TRUE(std::any_of(b.begin(), b.end(), [](double v) { return v != 0; })) << tensor.name;
    EXPECT_LE(relative_error(a, b), 1e-5) << tensor.name;
    ++compared;
  }
  EXPECT_GE(compared, 14);  // 2 blocks of 6 or more tensors, the embeddings, the final norm
  // The checkpoint holds each tensor once, whichever stages held it (the tied embedding on
  // the first and the last).
  EXPECT_EQ(got.tensors().size(), want.tensors().size());
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LayoutGradients,
    testing::Values(Layout{"replicated_dp2", 2, "", ""},
                    Layout{"distributed_optimizer_dp2", 2,
                           " --set parallel.distributed_optimizer=true", ""},
                    Layout{"tp2", 2, " --set parallel.tp=2", ""},
                    Layout{"shard_gradients_dp4", 4, " --set parallel.shard=gradients", ""},
                    Layout{"shard_parameters_dp4", 4, " --set parallel.shard=parameters", ""},
                    Layout{"llama_shard_parameters_dp4", 4, " --set parallel.shard=parameters", kLlama},
                    Layout{"llama_pp2_zb_h1", 2, " --set parallel.pp=2 --set parallel.schedule=zb-h1", kLlama},
                    Layout{"llama_pp2_zbv", 2, " --set parallel.pp=2 --set parallel.schedule=zbv",
                           kLlama + " --set model.n_layer=4"},
                    Layout{"llama_pp4_dualpipev", 4,
                           " --set parallel.pp=4 --set parallel.schedule=dualpipev",
                           kLlama + " --set model.n_layer=8" + kOneSample},
                    // The experts' gradients reduce-scattered over the 2 ranks that hold them.
                    Layout{"moe_ep2_dp4_shard_parameters", 4, " --set parallel.ep=2 --set parallel.shard=parameters",
                           kMoe},
                    Layout{"shard_gradients_dp4_shard_group2", 4,
                           " --set parallel.shard=gradients --set parallel.shard_group=2", ""},
                    Layout{"tp2_sequence_parallel", 2,
                           " --set parallel.tp=2 --set parallel.sequence_parallel=true", ""},
                    Layout{"llama_tp2_dp2_distributed_optimizer", 4,
                           " --set parallel.tp=2 --set parallel.distributed_optimizer=true",
                           kLlama},
                    Layout{"pp2", 2, " --set parallel.pp=2", ""},
                    Layout{"llama_pp2_vpp2_dp2", 4,
                           " --set parallel.pp=2 --set parallel.vpp=2"
                           " --set parallel.ddp_bucket_size=5000",
                           kLlama + " --set model.n_layer=4"},
                    Layout{"pp2_dp2", 4, " --set parallel.pp=2 --set parallel.ddp_bucket_size=5000",
                           ""},
                    Layout{"moe_ep2_dp4", 4, " --set parallel.ep=2", kMoe},
                    Layout{"moe_capacity_tp2_ep2", 4, " --set parallel.tp=2 --set parallel.ep=2",
                           kMoeCapacity},
                    Layout{"moe_capacity_tp2_sequence_parallel", 2,
                           " --set parallel.tp=2 --set parallel.sequence_parallel=true",
                           kMoeCapacity},
                    Layout{"moe_pp2_ep2_distributed_optimizer", 4,
                           " --set parallel.pp=2 --set parallel.ep=2"
                           " --set parallel.distributed_optimizer=true",
                           kMoe},
                    Layout{"moe_tp2_sequence_parallel_etp1_ep2", 2, kWholeExperts + " --set parallel.ep=2",
                           kMoe},
                    Layout{"llama_cp2_documents", 2, " --set parallel.cp=2", kLlama + kDocuments},
                    Layout{"cp2_tp2_sequence_parallel", 4,
                           " --set parallel.cp=2 --set parallel.tp=2 --set parallel.sequence_parallel=true", ""},
                    Layout{"moe_shared_tp2_sequence_parallel_etp1_dp2", 4, kWholeExperts, kMoeShared},
                    // q_norm and k_norm: whole on each tensor rank, which sees half the heads;
                    // their gradients are the sums over the ranks (and over the context ranks'
                    // tokens).
                    Layout{"qwen3_tp2", 2, " --set parallel.tp=2", kQwen3},
                    Layout{"qwen3_tp2_sequence_parallel", 2,
                           " --set parallel.tp=2 --set parallel.sequence_parallel=true", kQwen3},
                    Layout{"qwen3_cp2_tp2_sequence_parallel", 4,
                           " --set parallel.cp=2 --set parallel.tp=2 --set parallel.sequence_parallel=true", kQwen3},
                    // Latent attention: the down-projection and the latents' norms whole on
                    // both ranks, their gradients summed over the ranks' heads.
                    Layout{"latent_tp2_sequence_parallel", 2,
                           " --set parallel.tp=2 --set parallel.sequence_parallel=true", kLatent},
                    // Multi-token prediction's projections: whole on both ranks, each projecting
                    // its own tokens, their gradients summed over the ranks.
                    Layout{"llama_mtp2_tied_tp2_sequence_parallel", 2,
                           " --set parallel.tp=2 --set parallel.sequence_parallel=true", kLlamaMtp2Tied}),
    [](const testing::TestParamInfo<Layout>& info) { return info.param.name; });

}  // namespace
}  // namespace kiln::test
