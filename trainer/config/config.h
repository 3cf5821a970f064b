// The run config: sections model, moe, train, data, parallel, precision, backend, store, alerts.
// Loaded from JSON (or the embedded tiny defaults), overridden by --set, validated
// before anything runs. Key names here are the ones used in docs, the store and logs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln {

// Mixture of experts (docs/moe.md): the MLP of chosen layers becomes a router over
// num_experts expert MLPs, of which each token takes top_k. The config's `moe` section.
struct MoeConfig {
  int num_experts = 0;  // 0: a dense model
  int top_k = 2;
  int ffn_hidden = 0;      // each expert's MLP width; 0: the model's d_ff
  int shared_experts = 0;  // experts every token takes, as one MLP of shared_experts * ffn_hidden
  int layer_freq = 1;      // layer i is an MoE layer when i % layer_freq == 0 ...
  std::string layers;      // ... unless this lists them, e.g. "1,3,5"
  std::string score = "softmax";  // the router's scores: softmax | sigmoid
  bool normalize_top_k = true;    // the kept scores of a token are rescaled to sum to 1
  double gate_scale = 1.0;        // then every gate multiplied by this (DeepSeek-V3: 2.5)
  double aux_loss_coeff = 0.01;   // Switch/GShard load-balancing loss
  double z_loss_coeff = 0.0;      // router z-loss (ST-MoE)
  // Aux-loss-free balancing (DeepSeek-V3): after each step every expert's selection bias moves
  // by this towards the mean load; 0: off.
  double bias_update_rate = 0.0;
  double capacity_factor = 0.0;       // 0: dropless; else each expert takes at most
                                      // ceil(capacity_factor * tokens * top_k / num_experts)
  std::string drop_policy = "probs";  // over capacity, drop the lowest scores | the latest tokens
  bool pad_to_capacity = false;       // every expert computes exactly its capacity of rows
  // Group-limited routing (DeepSeek-V3): the experts cut into this many groups of consecutive
  // experts, each token picks its top_k from its route_groups_topk best groups only.
  int route_groups = 1;
  int route_groups_topk = 1;
  int dense_layers = 0;  // the first this many layers stay dense, whatever layer_freq says

  bool enabled() const { return num_experts > 0; }
  // Whether layer `layer` (0-based) of the model is an MoE layer.
  bool is_moe_layer(int layer) const;
};

// LoRA fine-tuning (docs/lora.md): low-rank adapters B A beside chosen linear layers, the
// base frozen. The config's `finetune.lora` keys.
struct LoraConfig {
  int rank = 0;           // r; 0: full fine-tuning, every parameter trains
  double alpha = 8;       // the adapters' output is scaled by alpha / rank (PEFT's lora_alpha)
  double dropout = 0;     // PEFT's lora_dropout on each adapter's input in training, in [0, 1)
  std::string targets = "q,v";  // the adapted layers, comma-separated (lora_targets.h)

  bool enabled() const { return rank > 0; }
  double scale() const { return alpha / rank; }
};

struct ModelConfig {
  std::string arch = "gpt2";  // gpt2 | llama
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;  // 0: same as n_head
  int d_model = 0;
  int d_ff = 0;  // 0: 4 * d_model
  int explicit_head_dim = 0;  // the key head_dim: each attention head's width; 0: d_model / n_head
  int vocab_size = 0;
  int seq_len = 0;
  double rope_theta = 10000.0;
  // none; llama3: Llama 3.1's long-context frequencies, by the factor, the two band edges and
  // the original context (Llama 3.1's own as defaults); or yarn: YaRN's, by the factor, the
  // original context, the two betas and the two mscales (trainer/model/rope_frequencies.h).
  std::string rope_scaling = "none";
  double rope_scaling_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int rope_original_seq_len = 8192;
  double rope_beta_fast = 32.0;
  double rope_beta_slow = 1.0;
  double rope_mscale = 1.0;
  double rope_mscale_all_dim = 0.0;
  bool tie_embeddings = true;
  // llama: biases on the query, key and value projections (Qwen2's); gpt2 has every bias.
  bool attention_bias = false;
  // llama: RMSNorm of each query and key head after the projection, before RoPE (Qwen3's).
  bool qk_norm = false;
  // mha (multi-head attention, grouped-query with n_kv_head), or mla: DeepSeek's multi-head
  // latent attention (trainer/model/latent_attention.h), the keys and values projected up from
  // a latent of kv_lora_rank values a token, the queries from one of q_lora_rank (0: projected
  // straight from the input), each query and key head qk_nope_head_dim values without RoPE and
  // qk_rope_head_dim turned by it (the keys' turned part one for every head), each value head
  // v_head_dim.
  std::string attention = "mha";
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  // DeepSeek-V3's multi-token prediction (trainer/model/multi_token_prediction.h): mtp_depth
  // modules after the last block, the k-th predicting the token k + 1 places ahead, each
  // depth's summed loss weighted by mtp_loss_weight / mtp_depth and divided by the step's
  // count of next-token targets, as the main loss is (DeepSeek's L_MTP). 0: none.
  int mtp_depth = 0;
  double mtp_loss_weight = 0.1;
  // The Hugging Face family a llama model is exported as where its layers do not decide it:
  // "mistral" (MistralForCausalLM); empty: named by its layers (hf_config.h).
  std::string family;
  // Mistral's attention window, kept to be written back: kiln attends over the whole sequence,
  // which is the window's attention only while the window is at least seq_len. 0: none.
  int sliding_window = 0;
  int make_vocab_size_divisible_by = 128;  // the output layer is padded to a multiple
  double norm_eps = 1e-5;
  double init_std = 0.02;
  MoeConfig moe;
  LoraConfig lora;

  bool is_llama() const { return arch == "llama"; }
  // Whether the fused query/key/value projection has a bias: GPT-2's, or a Llama layer's with
  // attention_bias (Qwen2).
  bool has_qkv_bias() const { return !is_llama() || attention_bias; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int ffn_dim() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  bool latent_attention() const { return attention == "mla"; }
  // The stage with the output layer reads the embedding: tied to it, or embedding the tokens
  // the multi-token prediction modules take (a pipeline's last stage keeps a copy).
  bool head_reads_embedding() const { return tie_embeddings || mtp_depth > 0; }
  // The transformer blocks: n_layer, and one in each multi-token prediction module (block
  // n_layer + k - 1 at depth k, which moe.* place as they would a further layer).
  int block_count() const { return n_layer + mtp_depth; }
  // A query and key head's width: under latent attention its part without RoPE and its part with.
  int head_dim() const {
    if (latent_attention()) return qk_nope_head_dim + qk_rope_head_dim;
    return explicit_head_dim > 0 ? explicit_head_dim : d_model / n_head;
  }
  // The dims of each query and key head RoPE turns (the trailing ones).
  int rope_dim() const { return latent_attention() ? qk_rope_head_dim : head_dim(); }
  // A value head's width.
  int value_head_dim() const { return latent_attention() ? v_head_dim : head_dim(); }
  int expert_ffn_dim() const { return moe.ffn_hidden > 0 ? moe.ffn_hidden : ffn_dim(); }
  int64_t padded_vocab() const;
};

// train.sample_prompt: the prompts the model continues at each validation step, written as
// one JSON string (the common case, and every config before several were allowed) or an
// array of strings; "" is a new document. kiln generate's default is the first.
struct SamplePrompts {
  static constexpr size_t kMax = 16;  // each costs train.sample_tokens decode steps per validation
  std::vector<std::string> texts{""};
  const std::string& first() const { return texts.front(); }
  bool operator==(const SamplePrompts&) const = default;
};
void to_json(nlohmann::json& j, const SamplePrompts& prompts);

struct TrainConfig {
  int64_t steps = 1000;
  int global_batch = 8;  // sequences per optimizer step
  int micro_batch = 8;   // sequences per forward/backward; the rest is accumulation
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup = 0;
  std::string decay = "cosine";  // cosine | linear | wsd | constant
  // Activations recomputed in backward instead of kept: none | selective (the attention
  // core) | full (each block from its input), as Megatron's --recompute-granularity.
  std::string recompute = "none";
  // On a GPU, capture the whole step once as a CUDA graph and replay it (docs/gpu.md#cuda-graphs)
  // where the run allows; the CPU backend ignores it.
  bool cuda_graphs = true;
  double wsd_decay_fraction = 0.2;  // wsd: the final fraction of steps that decays
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double clip_grad = 1.0;  // 0: no clipping
  uint64_t seed = 1234;
  int64_t log_interval = 10;
  int64_t eval_interval = 100;  // 0: no validation
  int64_t eval_iters = 10;
  int64_t checkpoint_interval = 0;      // save every N steps too; 0: at the end (and on stop or signal) only
  std::string checkpoint_dir = "checkpoints";  // each run saves under <dir>/<run name>/
  int checkpoint_keep = 0;              // keep the newest N checkpoints of a run; 0: all
  int checkpoint_failures = 3;          // the run fails when this many checkpoints in a row cannot be written
  // Interval checkpoints copied to host memory at the step boundary and written by a thread of
  // their own while training goes on, at most one at a time (docs/resilience.md).
  bool async_checkpoint = false;
  int sample_tokens = 0;  // after training, generate this many tokens
  SamplePrompts sample_prompt;
  double sample_temperature = 0.8;
};

struct DataConfig {
  // Indexed-dataset prefixes (PREFIX.bin + PREFIX.idx), or weight, prefix pairs to blend.
  std::vector<std::string> paths;
  std::string split = "969,30,1";  // train, valid, test weights over documents
  std::string tokenizer = "byte";
  std::string cache_dir;            // the datasets' index cache; empty: beside the data
  bool eod_mask_loss = false;       // no loss on targets that are the end-of-document token
  bool reset_position_ids = false;  // positions restart after each end-of-document token
  bool reset_attention_mask = false;  // tokens attend only within their own document
  // stream: Megatron's windows across documents; packed or padded: whole documents a sample
  // (trainer/data/document_samples.h), for conversations.
  std::string samples = "stream";

  // split as train, valid, test fractions summing to 1 (missing parts are 0).
  std::array<double, 3> split_fractions() const;
};

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int vpp = 1;
  // Layers of the first and of the last virtual pipeline stage, when they differ from the
  // others' even share (Megatron's --decoder-first/last-pipeline-num-layers); 0: even.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  // The pipeline's schedule (docs/parallelism.md#pipeline-schedules): 1f1b (Megatron's; its
  // interleaved form when vpp > 1) | zb-h1 (the zero-bubble family's: each backward split in
  // the input's gradient and the weights', the latter filling 1F1B's cool-down) | zbv (the
  // same over two chunks a stage in a V) | dualpipev (DeepSeek-V3's, in the same V).
  std::string schedule = "1f1b";
  bool sequence_parallel = false;
  // Context parallelism: each sequence split over cp ranks (2 cp chunks, rank r holding
  // chunks r and 2 cp - 1 - r), keys and values passed around the ring for attention.
  int cp = 1;
  // Expert parallelism: each MoE layer's experts split over ep ranks of the data-parallel
  // dimension (Megatron's rule), tokens moving to their experts' ranks by all-to-all.
  int ep = 1;
  // The expert-tensor-parallel size (Megatron's --expert-tensor-parallel-size): the ranks each
  // expert's hidden units split over. 0: tp, the experts split as the dense MLPs are; 1: every
  // expert whole, the expert-parallel groups folded over the tensor and data-parallel ranks
  // together, each tensor rank routing its own share of the tokens (sequence parallelism).
  int etp = 0;
  // What the data-parallel ranks shard (docs/parallelism.md#sharded-data-parallelism):
  // none | optimizer (ZeRO-1, Megatron's distributed optimizer) | gradients (ZeRO-2) |
  // parameters (ZeRO-3, fully sharded). distributed_optimizer=true is shard=optimizer.
  std::string shard = "none";
  // Sharded gradients or parameters: each block's weights gathered before each forward and
  // backward pass, the next block's started meanwhile (false: when needed, for measuring
  // what prefetch hides), and its gradients reduced every micro-batch; or, per step, every
  // unit gathered and reduced once a step and kept whole for it.
  bool shard_prefetch = true;
  bool shard_per_step = false;
  // Ranks a shard group holds (HSDP: shard within a node, replicate across): the gradient
  // ranks in consecutive groups of this many, each holding a whole copy of the sharded
  // state, the copies' gradients summed across the groups. 0: one group of them all.
  int shard_group = 0;
  bool distributed_optimizer = false;
  // Elements per data-parallel gradient bucket (Megatron's --ddp-bucket-size): each bucket's
  // all-reduce starts as soon as backward has finished its gradients.
  int64_t ddp_bucket_size = 40000000;
  // Seconds a rank waits for the others at a collective before it gives up and ends the
  // run: a rank that died or hangs must not hold the rest forever.
  double timeout_s = 120;
  // How GPU tensors move between ranks: nccl; mpi (staged through host memory: machines
  // without NCCL, and several ranks sharing one GPU); auto: nccl where the build has it.
  std::string device_comm = "auto";
};

// parallel.shard as a level; each shards what the one before it does and more.
enum class ShardLevel { None, Optimizer, Gradients, Parameters };
ShardLevel shard_level(const ParallelConfig& parallel);
// The level as parallel.shard names it.
const char* shard_name(ShardLevel level);

// What parallel.schedule asks of a pipeline: each backward split in the input's gradient and
// the weights' (zb-h1, zbv, dualpipev), and two chunks a stage in a V (zbv, dualpipev).
bool splits_backward(const ParallelConfig& parallel);
bool v_shaped(const ParallelConfig& parallel);
// The model chunks each pipeline stage holds: 2 in a V, else parallel.vpp.
int stage_chunk_count(const ParallelConfig& parallel);

struct PrecisionConfig {
  // fp32 | bf16 | fp16 | fp8 (bf16 with the blocks' linear products in FP8 on a GPU of compute
  // capability 8.9 or newer; the CPU emulates the same FP8 quantisation in fp32)
  std::string dtype = "fp32";
  // FP8's scaling recipe (trainer/precision/fp8_scaling.h): delayed | current, the steps of
  // amax history delayed scaling keeps, and the headroom 2^margin.
  std::string fp8_scaling = "delayed";
  int fp8_amax_history = 1024;
  int fp8_margin = 0;
};

struct BackendConfig {
  std::string device = "auto";  // cpu | cuda | auto
  int threads = 0;              // 0: every core
  // CUDA attention kernels: auto (cuDNN's fused attention where it loads and supports the
  // call, else kiln's) | cudnn | kiln. The CPU backend runs kiln's and refuses cudnn. kiln's
  // by default while the cuDNN path waits for its first run of the GPU suite (docs/gpu.md).
  std::string attention = "kiln";
  // Time cuBLASLt's candidate algorithms for each distinct matrix product in the first step
  // and keep the fastest (kernels/product_tuning.h). Off, each takes the heuristic's first
  // choice, which does not depend on timing noise: two runs then compute alike bit for bit.
  bool tune_products = true;
};

struct StoreConfig {
  std::string path;  // empty: $KILN_STORE, else ./kiln-runs.db (cli/store_path.h)
};

// The rules rank 0 judges at each logged step (docs/alerts.md); each threshold at 0 turns its
// rule off. Spike and throughput rules compare with the previous `window` logged steps once
// `min_samples` of them are in.
struct AlertsConfig {
  bool enabled = true;
  int window = 50;
  int min_samples = 10;
  double loss_zscore = 6;            // loss_spike: this many standard deviations above the mean
  double grad_zscore = 6;            // grad_spike: the same for the gradient norm
  double throughput_fraction = 0.5;  // throughput: tokens/s below this fraction of the median,
  int throughput_steps = 5;          // for this many logged steps in a row
  double straggler_fraction = 0.2;   // straggler: a rank's working time this much above the
  int straggler_steps = 3;           // median rank's, for this many logged steps in a row
  double stall_s = 600;              // stall: a step running this long
  double memory_fraction = 0.95;     // memory: a rank's peak above this fraction of its device's
  std::string command;               // run by /bin/sh -c with the alert as JSON on stdin
  double command_timeout_s = 30;
  std::string actions;  // "rule=action,...": pause | checkpoint | stop (| rewind, loss_spike alone)
                        // at the next step boundary
  int rewind_skip = 200;  // rewind: the global batches of data skipped after the checkpoint
  int max_rewinds = 3;    // rewind: at most this many in a run; later spikes only alert

  // actions parsed and checked, by rule.
  std::map<std::string, std::string> action_map() const;
  // Whether a loss spike rewinds the run (docs/resilience.md#rewinding-past-a-loss-spike).
  bool rewinds() const;
  // The global batches of data a run may skip over all its rewinds: its data is drawn for
  // that many more steps than it trains.
  int64_t rewind_reserve() const;
};

// Every alert rule's name, as the store, the hook's JSON and alerts.actions spell it.
inline constexpr const char* kAlertRules[] = {"nan",       "loss_spike", "grad_spike", "throughput",
                                              "straggler", "stall",      "memory"};

struct Config {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  ParallelConfig parallel;
  PrecisionConfig precision;
  BackendConfig backend;
  StoreConfig store;
  AlertsConfig alerts;

  int grad_accum() const { return train.global_batch / train.micro_batch; }
};

// Parses, applies defaults, validates. Throws kiln::Error naming the key and the reason.
Config config_from_json(const nlohmann::json& j);
// Fits what only makes sense within train.steps to a shorter run, as Megatron and torchtitan do
// for a smoke test (`--set train.steps=20` on a config that warms up over 50): a warm-up
// longer than the run becomes the run. Returns one warning line per change.
std::vector<std::string> fit_to_steps(TrainConfig& train);
// The learning-rate schedule's keys that differ ("train.steps 1000 -> 2000"), for a resumed
// run to say why its learning rate is not the one the checkpoint's schedule had next.
std::vector<std::string> schedule_changes(const TrainConfig& before, const TrainConfig& after);
// The whole resolved config, every key present (what a run records).
nlohmann::json config_to_json(const Config& config);
// Reads a JSON file, or the embedded tiny config when path is empty, then applies each
// "section.key=value" override in order (the value parses as JSON, else as a string).
Config load_config(const std::string& path, const std::vector<std::string>& overrides);
// The JSON of a config file, or of the embedded tiny config when path is empty, unvalidated.
nlohmann::json read_config_json(const std::string& path);
// A config given as JSON (a checkpoint's), with overrides applied the same way.
Config config_with_overrides(nlohmann::json j, const std::vector<std::string>& overrides);
void apply_override(nlohmann::json& j, const std::string& assignment);

}  // namespace kiln
