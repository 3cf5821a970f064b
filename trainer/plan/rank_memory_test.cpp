// A plan's memory is what the trainer allocates: for every rank of each layout, the model
// built and allocated as Trainer builds it (trainer/plan/rank_build.h) and its optimizer
// hold exactly the bytes plan_rank_memory gives, arena by arena.
#include "trainer/plan/rank_memory.h"

#include <gtest/gtest.h>

#include <memory>

#include "kernels/cpu/kernels.h"
#include "trainer/config/config.h"
#include "trainer/plan/rank_build.h"

namespace kiln {
namespace {

struct MemoryCase {
  const char* name;
  int world;
  std::vector<std::string> settings;
};

void PrintTo(const MemoryCase& c, std::ostream* os) { *os << c.name; }

class RankMemoryEqualsAllocation : public testing::TestWithParam<MemoryCase> {};

// What Trainer allocates on `rank`: its model (parameters, gradients, activations, scratch,
// recomputed, the op workspace the backend reserves) and its optimizer's state.
std::vector<ArenaSize> allocated(const Config& config, const ParallelLayout& layout, int rank, Ops& ops) {
  std::vector<std::unique_ptr<Communicator>> held;
  const RankGroups groups = planned_rank_groups(layout, rank, held);
  const int stage = layout.coordinates(rank).pp;
  const ModelSplit split = rank_model_split(config, layout, groups, stage);
  GptModel model(config.model, config.train.micro_batch, ops, compute_dtype(config.precision, ops.device()), 0,
                 activation_slots(config, layout, stage), split);
  AdamW optimizer(config.train, model.parameters(), ops, rank_optimizer_groups(config, layout, groups));
  std::vector<ArenaSize> arenas = model.memory();
  arenas.push_back({"optimizer", optimizer.bytes()});
  return arenas;
}

TEST_P(RankMemoryEqualsAllocation, ArenaByArenaOnEveryRank) {
  const MemoryCase& c = GetParam();
  std::vector<std::string> settings = {"model.n_layer=4", "train.global_batch=16", "train.micro_batch=2",
                                       "data.paths=[\"unused\"]"};
  settings.insert(settings.end(), c.settings.begin(), c.settings.end());
  const Config config = load_config("", settings);
  const ParallelLayout layout(config.parallel, c.world);
  const int threads = 2;
  const auto ops = make_cpu_ops(threads);
  const int64_t seq = config.model.seq_len / layout.cp();
  const size_t workspace = op_workspace_bytes(false, threads, config.train.micro_batch, seq,
                                              config.model.n_head / layout.tp(), config.model.head_dim());
  for (int rank = 0; rank < c.world; ++rank) {
    const std::vector<ArenaSize> want = allocated(config, layout, rank, *ops);
    const RankMemory got = plan_rank_memory(config, layout, rank, ops->device(), *ops, workspace);
    ASSERT_EQ(got.arenas.size(), want.size()) << "rank " << rank;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got.arenas[i].name, want[i].name) << "rank " << rank;
      EXPECT_EQ(got.arenas[i].bytes, want[i].bytes) << "rank " << rank << ", " << want[i].name;
    }
  }
}

// LoRA of rank 8 beside every projection of a small Llama (d_model 128, 4 heads of 32, 2 of
// them key/value heads, d_ff 192).
const std::vector<std::string> kLora = {"model.arch=llama", "model.n_kv_head=2", "model.d_ff=192",
                                        "finetune.lora.rank=8", "finetune.lora.targets=q,k,v,o,gate,up,down"};

// DeepSeek's latent attention in a small Llama: 4 heads of 24 + 8 (values 24), latents of 48
// and 32.
const std::vector<std::string> kLatent = {"model.arch=llama", "model.d_ff=192", "model.attention=mla",
                                          "model.q_lora_rank=48", "model.kv_lora_rank=32",
                                          "model.qk_nope_head_dim=24", "model.qk_rope_head_dim=8",
                                          "model.v_head_dim=24", "train.sample_tokens=0"};

const std::vector<std::string> kMoe = {"model.arch=llama", "model.n_kv_head=2", "model.d_ff=192",
                                       "moe.num_experts=4", "moe.top_k=2"};

std::vector<MemoryCase> cases() {
  std::vector<MemoryCase> all = {
      {"one_rank", 1, {}},
      {"tp2", 2, {"parallel.tp=2"}},
      {"tp2_sequence_parallel", 2, {"parallel.tp=2", "parallel.sequence_parallel=true"}},
      {"pp2_vpp2", 2, {"parallel.pp=2", "parallel.vpp=2"}},
      // The weight passes' copies of the linear layers' inputs and output gradients.
      {"pp2_zb_h1", 2, {"parallel.pp=2", "parallel.schedule=zb-h1"}},
      {"tp2_sequence_parallel_pp2_zb_h1", 4,
       {"parallel.tp=2", "parallel.sequence_parallel=true", "parallel.pp=2", "parallel.schedule=zb-h1"}},
      // The V's: two chunks a stage, and the last stage's gradient handed between them.
      {"pp2_zbv", 2, {"parallel.pp=2", "parallel.schedule=zbv"}},
      // Each chunk's activations in slots of its own.
      {"pp4_zbv", 4, {"model.n_layer=8", "parallel.pp=4", "parallel.schedule=zbv"}},
      {"pp4_vpp2", 4, {"model.n_layer=8", "parallel.pp=4", "parallel.vpp=2"}},
      {"pp2_dualpipev_uneven", 2,
       {"model.n_layer=5", "parallel.pp=2", "parallel.schedule=dualpipev", "parallel.first_stage_layers=2"}},
      {"pp4_uneven", 4, {"model.n_layer=6", "parallel.pp=4", "parallel.first_stage_layers=3",
                         "parallel.last_stage_layers=1"}},
      {"dp2_distributed_optimizer", 2, {"parallel.distributed_optimizer=true"}},
      {"tp2_pp2_dp2_distributed_optimizer", 8,
       {"parallel.tp=2", "parallel.pp=2", "parallel.distributed_optimizer=true"}},
      {"recompute_selective", 1, {"train.recompute=selective"}},
      {"pp2_recompute_full", 2, {"parallel.pp=2", "train.recompute=full"}},
      {"cp2_dp2_distributed_optimizer", 4, {"parallel.cp=2", "parallel.distributed_optimizer=true"}},
      {"dp2_shard_gradients", 2, {"parallel.shard=gradients"}},
      {"dp4_shard_parameters", 4, {"parallel.shard=parameters"}},
      {"llama_dp4_shard_parameters", 4,
       {"model.arch=llama", "model.n_kv_head=2", "model.d_ff=192", "parallel.shard=parameters"}},
      {"dp8_shard_parameters_shard_group4", 8, {"parallel.shard=parameters", "parallel.shard_group=4"}},
      {"cp2_dp2_shard_optimizer_shard_group2", 4, {"parallel.cp=2", "parallel.shard=optimizer", "parallel.shard_group=2"}},
      {"tp2_pp2_dp2_shard_parameters", 8, {"parallel.tp=2", "parallel.pp=2", "parallel.shard=parameters"}},
      {"cp2_dp2_shard_parameters_per_step", 4,
       {"parallel.cp=2", "parallel.shard=parameters", "parallel.shard_per_step=true"}},
      {"fp8_tp2_pp2_recompute_full", 4,
       {"precision.dtype=fp8", "parallel.tp=2", "parallel.pp=2", "train.recompute=full"}},
  };
  std::vector<std::string> ep2 = kMoe, etp1 = kMoe;
  ep2.insert(ep2.end(), {"parallel.ep=2", "parallel.distributed_optimizer=true"});
  etp1.insert(etp1.end(), {"parallel.tp=2", "parallel.sequence_parallel=true", "parallel.etp=1", "parallel.ep=2"});
  all.push_back({"moe_ep2_dp4_distributed_optimizer", 4, ep2});
  std::vector<std::string> ep2_sharded = kMoe;
  ep2_sharded.insert(ep2_sharded.end(), {"parallel.ep=2", "parallel.shard=parameters"});
  all.push_back({"moe_ep2_dp4_shard_parameters", 4, ep2_sharded});
  all.push_back({"moe_tp2_sequence_parallel_etp1_ep2", 2, etp1});
  // The experts' rows and gradients the split backward keeps for its weight pass.
  std::vector<std::string> ep2_zbv = kMoe;
  ep2_zbv.insert(ep2_zbv.end(), {"parallel.ep=2", "parallel.pp=2", "parallel.schedule=zbv", "moe.shared_experts=1"});
  all.push_back({"moe_ep2_pp2_zbv", 4, ep2_zbv});
  std::vector<std::string> lora = kLora;
  lora.insert(lora.end(), {"parallel.tp=2", "parallel.sequence_parallel=true", "parallel.pp=2",
                           "parallel.distributed_optimizer=true"});
  all.push_back({"lora_tp2_sequence_parallel_pp2_dp2_distributed_optimizer", 8, lora});
  // LoRA's dropout: its scratch copy of an adapter's input, as wide as a rank's widest.
  std::vector<std::string> dropout = kLora;
  dropout.insert(dropout.end(), {"finetune.lora.dropout=0.1", "parallel.tp=2", "parallel.cp=2"});
  all.push_back({"lora_dropout_tp2_cp2", 4, dropout});
  // Latent attention: its latents and padded core per slot, and the weight passes' copies.
  std::vector<std::string> latent = kLatent, latent_zbv = kLatent;
  latent.insert(latent.end(), {"parallel.tp=2", "parallel.sequence_parallel=true", "train.recompute=selective"});
  all.push_back({"latent_tp2_sequence_parallel_recompute_selective", 2, latent});
  latent_zbv.insert(latent_zbv.end(), {"parallel.pp=2", "parallel.schedule=zbv", "model.q_lora_rank=0"});
  all.push_back({"latent_without_query_latent_pp2_zbv", 2, latent_zbv});
  // Multi-token prediction: the modules' parameters, activations and logits on the last
  // stage, with its copy of the embedding; their blocks' experts.
  std::vector<std::string> mtp = kMoe;
  mtp.insert(mtp.end(), {"model.mtp_depth=2", "parallel.tp=2", "parallel.sequence_parallel=true", "parallel.pp=2",
                         "train.recompute=full"});
  all.push_back({"mtp2_moe_tp2_sequence_parallel_pp2_recompute_full", 4, mtp});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, RankMemoryEqualsAllocation, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<MemoryCase>& info) { return std::string(info.param.name); });

TEST(RankMemory, LoraHoldsTheBaseWithoutGradientsOrOptimizerState) {
  std::vector<std::string> settings = {"model.n_layer=4", "train.global_batch=16", "train.micro_batch=2",
                                       "data.paths=[\"unused\"]"};
  settings.insert(settings.end(), kLora.begin(), kLora.end());
  const Config lora = load_config("", settings);
  settings.push_back("finetune.lora.rank=0");
  const Config full = load_config("", settings);
  const auto ops = make_cpu_ops(1);
  const auto plan = [&](const Config& config) {
    return plan_rank_memory(config, ParallelLayout(config.parallel, 1), 0, Device::Cpu, *ops, 0);
  };
  const RankMemory with = plan(lora), without = plan(full);
  // Per layer, A [8, in] and B [out, 8] of q (128 x 128), k and v (64 x 128 each), o (128 x
  // 128), gate and up (192 x 128 each) and down (128 x 192): 14848 elements, each tensor a
  // multiple of the 32-element alignment; 4 layers, F32.
  const size_t adapters = size_t{4} * 14848 * sizeof(float);
  EXPECT_EQ(with.bytes("parameters"), adapters);
  EXPECT_EQ(with.bytes("gradients"), adapters);
  // The whole base, in the compute dtype, as a full fine-tune holds it, but frozen.
  EXPECT_EQ(with.bytes("frozen parameters"), without.bytes("parameters"));
  EXPECT_EQ(without.bytes("frozen parameters"), 0u);
  // AdamW's two moments of the adapters alone, and its small tables.
  EXPECT_GE(with.bytes("optimizer"), 2 * adapters);
  EXPECT_LT(with.bytes("optimizer"), 2 * adapters + 4096);
  EXPECT_GT(without.bytes("optimizer"), 2 * without.bytes("parameters"));
}

// Under parallel.shard=parameters a rank's parameters, gradients and optimizer state are its
// 1/dp shard of each unit (padded to 32 elements a shard), and the windows the same at every
// dp but for that padding: the embeddings' and the head's, and two blocks'.
TEST(RankMemory, ShardedParametersFallAsOneOverDataParallelRanks) {
  const std::vector<std::string> settings = {"model.n_layer=8", "train.global_batch=16", "train.micro_batch=2",
                                             "data.paths=[\"unused\"]", "parallel.shard=parameters"};
  const auto ops = make_cpu_ops(1);
  const Config config = load_config("", settings);
  const auto plan = [&](int dp) { return plan_rank_memory(config, ParallelLayout(config.parallel, dp), 0, Device::Cpu, *ops, 0); };
  const RankMemory one = plan(1);
  EXPECT_EQ(one.bytes("unit windows"), 0u);
  // At dp 1 nothing is sharded: whole F32 values and gradients, and AdamW's two moments.
  const size_t whole = one.bytes("parameters");
  EXPECT_EQ(one.bytes("gradients"), whole);
  const size_t sharded_one = one.bytes("parameters") + one.bytes("gradients") + one.bytes("optimizer");
  size_t windows = 0;
  for (int dp : {2, 4, 8}) {
    const RankMemory m = plan(dp);
    // 10 units (the head, 8 blocks, the embeddings), each padded by at most 32 x dp elements.
    const size_t padding = size_t{10} * 32 * dp * sizeof(float);
    EXPECT_GE(m.bytes("parameters") * dp, whole) << "dp " << dp;
    EXPECT_LE(m.bytes("parameters") * dp, whole + padding) << "dp " << dp;
    EXPECT_EQ(m.bytes("gradients"), 0u) << "dp " << dp;
    // The optimizer's moments and summed-gradient shard: three shards of F32.
    const size_t state = m.bytes("optimizer");
    EXPECT_GE(state, 3 * m.bytes("parameters")) << "dp " << dp;
    EXPECT_LT(state, 3 * m.bytes("parameters") + 4096) << "dp " << dp;
    const size_t sharded = m.bytes("parameters") + m.bytes("gradients") + state;
    EXPECT_LT(sharded * dp, sharded_one * 5 / 4 + 4096 * dp) << "dp " << dp;
    // A window holds F32 values and gradients.
    if (windows == 0) windows = m.bytes("unit windows");
    EXPECT_LE(m.bytes("unit windows"), windows + 2 * padding) << "dp " << dp;
    EXPECT_GE(m.bytes("unit windows") + 2 * padding, windows) << "dp " << dp;
    std::printf("dp %d: parameters %zu, optimizer %zu, windows %zu bytes\n", dp, m.bytes("parameters"), state,
                m.bytes("unit windows"));
  }
  EXPECT_LT(windows, whole);
}

// The experts are sharded too: over the ranks that hold the same experts (ep 2, so 2 of them
// at 4 ranks and 4 at 8), as the dense parts over the data-parallel ranks (4 and 8). Both
// halve from 4 ranks to 8, and at 4 a rank keeps at most half of what it holds whole under
// shard=optimizer (1/4 of the dense values and 1/2 of its experts').
TEST(RankMemory, ShardedExpertsFallAsOneOverTheirDataParallelRanks) {
  std::vector<std::string> settings = {"model.n_layer=2", "train.global_batch=16", "train.micro_batch=2",
                                       "data.paths=[\"unused\"]", "parallel.ep=2"};
  settings.insert(settings.end(), kMoe.begin(), kMoe.end());
  const auto ops = make_cpu_ops(1);
  const auto parameters = [&](const std::string& shard, int world) {
    std::vector<std::string> with = settings;
    with.push_back("parallel.shard=" + shard);
    const Config config = load_config("", with);
    return plan_rank_memory(config, ParallelLayout(config.parallel, world), 0, Device::Cpu, *ops, 0).bytes("parameters");
  };
  const size_t whole = parameters("optimizer", 4), four = parameters("parameters", 4), eight = parameters("parameters", 8);
  // 4 units, each part padded by at most 32 elements a shard, of 8 shards.
  const size_t padding = size_t{4} * 2 * 32 * 8 * sizeof(float);
  EXPECT_LE(2 * four, whole + padding);
  EXPECT_LE(2 * eight, four + padding);
  EXPECT_GE(2 * eight + padding, four);
}

TEST(RankMemory, LoraDropoutAddsOneScratchCopyOfTheWidestInput) {
  std::vector<std::string> settings = {"train.global_batch=16", "train.micro_batch=2", "data.paths=[\"unused\"]"};
  settings.insert(settings.end(), kLora.begin(), kLora.end());
  const Config plain = load_config("", settings);
  settings.push_back("finetune.lora.dropout=0.1");
  const Config dropout = load_config("", settings);
  const auto ops = make_cpu_ops(1);
  const auto plan = [&](const Config& config) {
    return plan_rank_memory(config, ParallelLayout(config.parallel, 1), 0, Device::Cpu, *ops, 0);
  };
  // [micro_batch, seq_len, 192]: down's input (d_ff) is the widest, above d_model's 128;
  // nothing else grows, and backward draws the mask again instead of keeping it.
  const RankMemory with = plan(dropout), without = plan(plain);
  EXPECT_EQ(with.bytes("scratch") - without.bytes("scratch"), size_t{2} * plain.model.seq_len * 192 * sizeof(float));
  EXPECT_EQ(with.bytes("activations"), without.bytes("activations"));
  EXPECT_EQ(with.bytes("parameters"), without.bytes("parameters"));
}

}  // namespace
}  // namespace kiln
