// The op table: every operation a training step performs, with one signature and one
// implementation per backend (kernels/cpu and kernels/cuda). The object that implements it is
// also the op context: the CPU one carries the thread count, the CUDA one the stream and
// library handles. The factories at the end hand out each backend inside CheckedOps
// (kernels/checked_ops.h), which checks every op's tensors before the backend sees them.
//
// Conventions shared by every op:
//  - matrices are row-major; a linear layer's weight is [out, in] as in PyTorch;
//  - "rows" N is batch x sequence, flattened;
//  - an op named *_backward accumulates (+=) into parameter gradients, because
//    micro-batches of one step add into the same gradient buffer; what it does to the
//    input gradient is stated at each op;
//  - `positions` and `key_starts` are optional per-token [B, T] I32 tensors, empty when
//    absent: Megatron's position and attention resets for rows that pack several documents.
//    Their values are the caller's to validate (a GPU could not check them without a copy
//    back to the host);
//  - precision: activations and parameters are the compute dtype (F32 or F64 on the CPU;
//    F32, BF16 or F16 on CUDA; FP8 products cast their operands to E4M3/E5M2 codes first);
//    norm statistics, log-sum-exps, losses, parameter
//    gradients, master weights and optimizer state are F32 (F64 when computing in F64).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/counter_random.h"
#include "kernels/dropout_mask.h"
#include "kernels/expert_route.h"
#include "kernels/head_columns.h"
#include "kernels/optimizer_scalars.h"
#include "kernels/tensor.h"

namespace kiln {

// Shape of the fused query/key/value activation [B, T, (n_head + 2 * n_kv_head) * head_dim]:
// all query heads first, then the key heads, then the value heads.
struct AttentionShape {
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  // The trailing dims of each query and key head RoPE turns (0: all head_dim), as DeepSeek's
  // latent attention turns only the part of a head its keys share.
  int rope_dim = 0;
  int qkv_width() const { return (n_head + 2 * n_kv_head) * head_dim; }
  int rotated_dim() const { return rope_dim > 0 ? rope_dim : head_dim; }
};

// The optimizer's segment table: a [n, 3] I64 tensor of (begin, end, decay) rows over the
// flat parameter buffers, one row per parameter tensor, sorted by begin and not overlapping;
// decay is 0 or 1.
struct AdamWStep {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0;
  int64_t step = 1;  // 1-based, for bias correction
  // Each gradient is multiplied by this as it is read (1 / the loss scale, times the clip's
  // factor): one pass over the gradients instead of two.
  double grad_scale = 1;
  // When given, the optimizer's scalars (optimizer_scalars.h: F64, in the backend's memory):
  // the step reads its learning-rate terms and grad_scale from there, in place of lr,
  // weight_decay, step and grad_scale, and leaves every tensor unchanged when their skip is
  // set. A captured step (CUDA graphs) reads each step's values this way.
  Tensor scalars;
};

// A sequence of ops captured once (a CUDA graph) and replayed on the ops' stream.
class OpGraph {
 public:
  virtual ~OpGraph() = default;
  // Queues one replay of every captured op, on the same memory, and returns without waiting.
  virtual void launch() = 0;
};

// The largest shapes a run will pass to the ops, known from the config before step 1, and
// the dtype its activations compute in.
struct OpLimits {
  int64_t micro_batch = 0;
  int64_t seq_len = 0;
  AttentionShape heads;
  DType dtype = DType::F32;
};

// Which kernels the CUDA backend computes attention with (backend.attention): cuDNN's fused
// flash attention where it loads and supports the call, else kiln's (Auto); cuDNN's, refusing
// to start without it (Cudnn); kiln's alone (Kiln).
enum class AttentionChoice { Auto, Cudnn, Kiln };

// The values of an optional per-token tensor (positions, key_starts): null when it is absent.
inline const int32_t* per_token_values(const Tensor& values) {
  return values.empty() ? nullptr : values.as<int32_t>();
}

class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // ---- memory -------------------------------------------------------------------
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // Host memory the backend copies to and from fastest (page-locked on CUDA): the staging
  // buffers of a communicator that moves device tensors through the host.
  virtual void* allocate_host(size_t bytes) = 0;
  virtual void release_host(void* ptr) = 0;
  // Each waits for the ops queued before it, so it reads what they wrote.
  virtual void copy_to_host(void* host, const Tensor& src) = 0;
  virtual void copy_from_host(const Tensor& dst, const void* host) = 0;
  // Queues a copy from page-locked host memory (allocate_host's) and returns without
  // waiting: `host` must hold its values until the copy has run (a later synchronize() or
  // copy_to_host). Captured into a graph, each replay copies what `host` holds then.
  virtual void copy_from_pinned(const Tensor& dst, const void* host) = 0;
  virtual void fill(const Tensor& x, double value) = 0;
  // out = x converted to out's dtype (same element count).
  virtual void cast(const Tensor& out, const Tensor& x) = 0;
  // The elements of x that `runs` names = mean + std * z, z the standard normal of index
  // runs.index(e) in stream `stream` under `seed` (kernels/counter_random.h), rounded to x's
  // dtype as copy_from_doubles rounds (double to float, then to bf16 or fp16); the rest of x is
  // left alone. The same bits on every backend and thread count: parameters start this way.
  virtual void fill_normal(const Tensor& x, const RandomRuns& runs, uint64_t seed, uint64_t stream,
                           double mean, double std) = 0;
  // Bytes this backend can still allocate (device memory, or the host's available memory),
  // so a run that does not fit is refused before it starts.
  virtual size_t available_memory() const = 0;
  // Allocates the ops' own working memory once, before the first step, and returns its
  // size in bytes (the CPU's attention scratch; a GPU's library workspaces).
  virtual size_t reserve(const OpLimits& limits) = 0;
  // Which kernels compute attention at the shapes reserve() was given, for the start-up
  // banner: "kiln's kernels", or "cuDNN 9.19.0 fused flash attention".
  virtual std::string attention() const { return "kiln's kernels"; }
  // Waits until every op queued so far has finished (a no-op where ops run synchronously),
  // so a host clock can time a phase of the step.
  virtual void synchronize() = 0;
  // The CUDA stream the ops are queued on (a cudaStream_t), for a communicator that must
  // follow them; null where ops run on the host.
  virtual void* stream() const { return nullptr; }
  // Runs later ops on at most `threads` host threads (never more than it was made with):
  // a CPU backend's share of a machine other runs use too. Device backends ignore it.
  virtual void limit_threads(int /*threads*/) {}

  // ---- dense algebra ------------------------------------------------------------
  // out[M, N] = op(a) * op(b) (+ out when accumulate), op = transpose when asked.
  virtual void matmul(const Tensor& out, const Tensor& a, bool transpose_a, const Tensor& b,
                      bool transpose_b, bool accumulate) = 0;
  // out[N, C] += bias[C] on every row.
  virtual void add_bias(const Tensor& out, const Tensor& bias) = 0;
  // dbias[C] += sum over rows of dout[N, C].
  virtual void bias_backward(const Tensor& dbias, const Tensor& dout) = 0;
  // out = a + b, elementwise (out may alias a or b).
  virtual void add(const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  // x *= factor.
  virtual void scale(const Tensor& x, double factor) = 0;
  // Columns [first, first + c) of out[N, C] += factor * x[N, c]: one part of a fused layer's
  // output (a LoRA adapter's on the query part of the fused qkv).
  virtual void add_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) = 0;
  // out[N, c] = factor * columns [first, first + c) of x[N, C] (overwrites).
  virtual void take_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) = 0;
  // Head blocks moved between two [N, *] matrices (overwrites): for each row, out's block h =
  // x's block h, as `columns` places them; with out_stride 0, out's one block = the sum of
  // x's blocks in head order (the gradient of a block every head reads). Latent attention
  // assembles its heads with it (trainer/model/latent_attention.h).
  virtual void copy_head_columns(const Tensor& out, const Tensor& x, const HeadColumns& columns) = 0;
  // out[N, C] = x[N, C] with the elements the mask drops zeroed and the rest multiplied by
  // mask.factor() (+ out when accumulate): a LoRA adapter's dropout of its input, and the same
  // of the input's gradient in backward (kernels/dropout_mask.h).
  virtual void dropout(const Tensor& out, const Tensor& x, const DropoutMask& mask, bool accumulate) = 0;
  // sum[0] += the sum of squares of x (F32 or F64), accumulated in double: the square of the
  // gradient norm. sum is an F64 view of one value in the backend's memory (one of the
  // optimizer's scalars); nothing waits for the device.
  virtual void sum_squares(const Tensor& sum, const Tensor& x) = 0;

  // ---- a linear layer's products, with their neighbours fused ---------------------
  // Each computes exactly the unfused ops named after it, in that order: that is the CPU
  // backend's body (kernels/fused_matmul.h). On CUDA the bias, the GELU and the bias
  // gradient happen inside cuBLASLt's product (its epilogues), or, where cuBLASLt has no
  // kernel for the call, as those ops. x [N, in], weight [out, in] as in PyTorch, outputs
  // [N, out], bias [out]: all of the compute dtype; dweight and dbias are parameter gradients.
  // out = x weight^T + bias: matmul, add_bias.
  virtual void matmul_bias(const Tensor& out, const Tensor& x, const Tensor& weight,
                           const Tensor& bias) = 0;
  // pre = x weight^T + bias, out = gelu(pre): matmul, add_bias, gelu_forward. pre is what
  // the backward's matmul_dgelu reads.
  virtual void matmul_bias_gelu(const Tensor& out, const Tensor& pre, const Tensor& x,
                                const Tensor& weight, const Tensor& bias) = 0;
  // dweight += dy^T x, dbias += the sum of dy's rows: bias_backward, matmul (accumulating).
  virtual void matmul_bias_grad(const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                                const Tensor& x) = 0;
  // The input gradient of a layer whose input was gelu(pre): dx = gelu'(pre) * (dy weight),
  // dy [N, out], dx and pre [N, in] (overwrites dx): matmul into dx, gelu_backward in place.
  virtual void matmul_dgelu(const Tensor& dx, const Tensor& dy, const Tensor& weight,
                            const Tensor& pre) = 0;

  // On (the default), the fused products above use the device library's epilogues; off,
  // they run as their separate ops, as before the epilogues existed: what
  // `kiln_bench_step --products plain` measures the epilogues against. Backends whose fused
  // products are the separate ops (the CPU's) ignore it.
  virtual void fuse_products(bool /*on*/) {}

  // ---- FP8 products (precision.dtype=fp8; kernels/fp8_meta.h) ----------------------
  // FP8 codes are E4M3 (weights, activations) or E5M2 (gradients) tensors. Each cast tensor
  // has its scaling state `meta`, F32 [kFp8MetaSize] in the backend's memory: the scale it is
  // cast with, its inverse (what recovers the values) and the amax its casts recorded.
  // codes[R, C] = fp8(x * scale) in codes' format, rounded to nearest even and saturating at
  // the format's largest value (kernels/fp8_convert.h), and codes_t[C, R] the same codes
  // transposed; either may be empty. amax = max(amax, max |x|), NaN once x holds one.
  // x [R, C] is of the compute dtype.
  virtual void fp8_cast_transpose(const Tensor& codes, const Tensor& codes_t, const Tensor& meta,
                                  const Tensor& x) = 0;
  // Current scaling: amax = max |x|, then the scale for `format` (E4M3 or E5M2) with 2^-margin
  // headroom and its inverse from it (kernels/fp8_scale.h).
  virtual void fp8_current_scale(const Tensor& meta, const Tensor& x, DType format, int margin) = 0;
  // out[M, N] = (a[M, K] b[N, K]^T) times both inverse scales (+ out when accumulate): both
  // operands K-contiguous (the TN layout cuBLASLt's FP8 kernels need), never two E5M2,
  // accumulated in fp32; out is of the compute dtype, or F32 (a parameter gradient).
  virtual void fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b,
                          const Tensor& b_meta, bool accumulate) = 0;
  // Why this backend cannot compute FP8 products, in one line; "" where it can.
  virtual std::string fp8_unsupported() const = 0;

  // ---- choosing the products' algorithms ------------------------------------------
  // While on, the first call of each distinct product (sizes, transposes, dtypes, fused
  // epilogue) times the library's best candidate algorithms and keeps the fastest for the
  // rest of the run; off, a new product takes the library's first choice. Timing waits for
  // the device, so the trainer turns it on for step 1 only, whose products are the run's;
  // a product first met while a CUDA graph is being captured is never timed. Backends with
  // one algorithm a product (the CPU's BLAS) ignore it.
  virtual void tune_products(bool /*on*/) {}
  // What tuning did, for the banner: "" where nothing was timed.
  virtual std::string product_tuning() const { return {}; }

  // ---- embedding ----------------------------------------------------------------
  // out[B, T, C] = wte[tokens] (+ wpe[p] when wpe is given, p = positions[b, t], or t when
  // positions is empty). A token id outside [0, wte rows) takes a zero row: it is another
  // vocabulary-parallel rank's.
  virtual void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte,
                                 const Tensor& wpe, const Tensor& positions) = 0;
  // dwte[tokens] += dout; dwpe[p] += dout (when given), p as in forward; ids outside
  // [0, dwte rows) add nothing. Deterministic.
  virtual void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& tokens,
                                  const Tensor& dout, const Tensor& positions) = 0;

  // ---- normalisation (statistics in the compute dtype, eps inside the root) -----
  // out = (x - mean) * rstd * weight + bias; saves mean[N], rstd[N].
  virtual void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 double eps) = 0;
  // dx += ..., dweight += ..., dbias += ...; dweight and dbias empty: a frozen norm's, dx
  // alone; dx empty: the weight gradients alone (a split backward's weight pass).
  virtual void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                  const Tensor& dout, const Tensor& x, const Tensor& weight,
                                  const Tensor& mean, const Tensor& rstd) = 0;
  // out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps); saves rstd[N].
  virtual void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                               const Tensor& weight, double eps) = 0;
  // dx += ..., dweight += ... (dweight empty: a frozen norm's, dx alone; dx empty: dweight
  // alone)
  virtual void rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout,
                                const Tensor& x, const Tensor& weight, const Tensor& rstd) = 0;

  // ---- activations --------------------------------------------------------------
  // GELU, tanh approximation (GPT-2's).
  virtual void gelu_forward(const Tensor& out, const Tensor& x) = 0;
  // dx = dout * gelu'(x) (overwrites; dx may alias dout).
  virtual void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) = 0;
  // x[N, 2F] holds [gate | up] per row; out[N, F] = silu(gate) * up.
  virtual void swiglu_forward(const Tensor& out, const Tensor& x) = 0;
  // dx[N, 2F] = gradients of gate and up (overwrites).
  virtual void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) = 0;

  // ---- attention ----------------------------------------------------------------
  // Rotary embedding of the query and key heads of qkv[B, T, qkv_width], in place, with
  // the rotate-half pairing (i, i + r/2) over each head's last r = shape.rotated_dim() dims.
  // table[P, r/2, 2] holds cos, sin by position; token (b, t) turns by row positions[b, t]
  // of it (row t when positions is empty), which must be below P.
  virtual void rope_forward(const Tensor& qkv, const Tensor& table, AttentionShape shape,
                            const Tensor& positions) = 0;
  // The inverse rotation of the query and key gradients in dqkv, in place.
  virtual void rope_backward(const Tensor& dqkv, const Tensor& table, AttentionShape shape,
                             const Tensor& positions) = 0;
  // Causal softmax attention with grouped-query heads: out[B, T, n_head * head_dim],
  // lse[B, n_head, T] the log-sum-exp of each scaled score row (all backward needs). The
  // query at (b, i) attends to the keys [key_starts[b, i], i] of its row, with
  // 0 <= key_starts[b, i] <= i ([0, i] when key_starts is empty).
  virtual void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv,
                                 AttentionShape shape, const Tensor& key_starts) = 0;
  // dqkv[B, T, qkv_width] (overwrites); key_starts as in forward.
  virtual void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                  const Tensor& out, const Tensor& lse, AttentionShape shape,
                                  const Tensor& key_starts) = 0;
  // Context parallelism's ring attention (docs/parallelism.md): the query heads of qkv
  // [B, Tq, qkv_width] against one block of keys and values, kv [B, Tk, 2 * n_kv_head *
  // head_dim] (key heads, then value heads: split_kv's layout). Causality goes by token index
  // in the whole sequence: the query i at q_index[i] sees the keys j with k_index[j] <=
  // q_index[i] and >= its key start (key_starts [B, Tq], token indices; empty: 0). q_index
  // [Tq] and k_index [Tk] are I32, k_index rising (a rank's chunks in order). Forward merges the block's softmax into the running out
  // [B, Tq, n_head * head_dim] and lse [B, n_head, Tq] by log-sum-exp (start them at 0 and
  // -inf); a query that sees no key of the block keeps its own.
  virtual void ring_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv,
                                      const Tensor& kv, const Tensor& q_index, const Tensor& k_index,
                                      AttentionShape shape, const Tensor& key_starts) = 0;
  // With the merged out and lse of every block: the query heads of dqkv += the block's dQ,
  // dkv += its dK and dV.
  virtual void ring_attention_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout,
                                       const Tensor& qkv, const Tensor& kv, const Tensor& out,
                                       const Tensor& lse, const Tensor& q_index, const Tensor& k_index,
                                       AttentionShape shape, const Tensor& key_starts) = 0;
  // kv[B, T, 2 * n_kv_head * head_dim] = the key and value heads of qkv[B, T, qkv_width].
  virtual void split_kv(const Tensor& kv, const Tensor& qkv, AttentionShape shape) = 0;
  // The key and value heads of dqkv += dkv (split_kv's layout).
  virtual void add_kv_gradient(const Tensor& dqkv, const Tensor& dkv, AttentionShape shape) = 0;
  // Inference with a key/value cache: qkv[B, T, qkv_width] holds positions [pos, pos + T)
  // of each sequence (RoPE applied). Their key and value heads are first written into rows
  // [pos, pos + T) of k_cache and v_cache [B, capacity, n_kv_head * head_dim]; then the
  // query of position pos + t attends causally to cache rows [0, pos + t]:
  // out[B, T, n_head * head_dim]. Rows past pos + T are neither read nor written.
  virtual void attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                                const Tensor& qkv, int64_t pos, AttentionShape shape) = 0;

  // ---- mixture of experts: routing (kernels/expert_route.h: the rule and the losses) ----
  // Routing's statistics (gate, stats, counts, shares, bias, tally) are F32 (F64 when
  // computing in F64); choices, rows and offsets I32.
  // From the router's logits [N, E] and the selection bias [E]: choice [N, k], each token's
  // experts best first; gate [N, k], their gates; stats [E + 2], each expert's routing
  // probabilities summed over the N tokens (P_e), then the tokens' mean entropy and mean
  // squared log-sum-exp (the z-loss's value).
  virtual void route_tokens(const Tensor& choice, const Tensor& gate, const Tensor& stats, const Tensor& logits,
                            const Tensor& bias, const ExpertRoute& route) = 0;
  // The experts' rows of route_tokens' choices: row [N, k], each choice's row (-1 when the
  // capacity drops it); offsets [E + 1], each expert's first row, up to the M rows in all;
  // source and row_gate [at least M], each row's token and gate (-1 and 0 on padding rows);
  // counts [2, E], each expert's choices, then those of them dropped.
  virtual void route_rows(const Tensor& row, const Tensor& source, const Tensor& row_gate, const Tensor& offsets,
                          const Tensor& counts, const Tensor& choice, const Tensor& gate,
                          const ExpertRoute& route) = 0;
  // d_logits [N, E] = the router logits' gradient: through the gates from d_gate [N, k], and at
  // loss's weights through the balancing loss, whose choices c_e are shares [E] (of loss.tokens
  // tokens), and the z-loss. When tally [2] is given, tally[0] += the balancing loss's value
  // (P_e from route_tokens' stats) and tally[1] += 1: a step's sums, counted on the device.
  virtual void route_backward(const Tensor& d_logits, const Tensor& tally, const Tensor& d_gate,
                              const Tensor& logits, const Tensor& choice, const Tensor& stats,
                              const Tensor& shares, const ExpertRoute& route, const RouteLoss& loss) = 0;

  // ---- mixture of experts: moving token rows to their experts and back -----------
  // Row indices are I32; an index < 0 names no row. Weights are F32 (F64 when computing
  // in F64), one per row index; an empty weights tensor means 1.
  // out[m] = weights[m] * x[rows[m]] for each of the M rows of out[M, C] (a zero row where
  // rows[m] < 0): the dispatch of tokens to their experts' rows, or of gradients back.
  virtual void gather_rows(const Tensor& out, const Tensor& x, const Tensor& rows,
                           const Tensor& weights) = 0;
  // out[n] = sum over j of weights[n, j] * x[rows[n, j]] for each row of out[N, C], rows and
  // weights [N, k] (+ out when accumulate): the experts' outputs combined per token.
  virtual void combine_rows(const Tensor& out, const Tensor& x, const Tensor& rows,
                            const Tensor& weights, bool accumulate) = 0;
  // out[n, j] = a[n] . b[rows[n, j]] (0 where rows[n, j] < 0), a[N, C], b[M, C], out and
  // rows [N, k]: the gradient of each token's expert weights.
  virtual void row_dots(const Tensor& out, const Tensor& a, const Tensor& b,
                        const Tensor& rows) = 0;

  // ---- mixture of experts: every expert's products in one call -------------------
  // Expert e owns rows [offsets[e], offsets[e + 1]) of the operands grouped by rows (offsets:
  // the E + 1 row boundaries on the host, ascending from 0 to their rows) and rows
  // [e * W, (e + 1) * W) of a weight stacked over the E experts, w [E * W, D]:
  //   out_e = x_e w_e^T when transpose_w (out [R, W], x [R, D]): a layer's forward;
  //   out_e = x_e w_e otherwise          (out [R, D], x [R, W]): its input gradient.
  // What one matmul per expert computes (kernels/expert_products.h); the GPU's is one grouped
  // GEMM. out may be of x's type only.
  virtual void expert_matmul(const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                             const std::vector<int64_t>& offsets) = 0;
  // The stacked weight's gradient: dw_e [W, D] += dy_e^T x_e for every expert, dy [R, W] and
  // x [R, D] grouped by rows (dw of their type, or F32 for 16-bit ones, as matmul's out).
  virtual void expert_weight_grad(const Tensor& dw, const Tensor& dy, const Tensor& x,
                                  const std::vector<int64_t>& offsets) = 0;

  // ---- loss ---------------------------------------------------------------------
  // Softmax cross-entropy over the first vocab_size columns of logits[N, Vp] (the rest
  // is padding and takes no part). losses[N], lse[N]. A target < 0 is masked: loss 0. A
  // target >= vocab_size (another vocabulary-parallel rank's column) has no logit here: its
  // loss is the lse alone.
  virtual void cross_entropy_forward(const Tensor& losses, const Tensor& lse,
                                     const Tensor& logits, const Tensor& targets,
                                     int64_t vocab_size) = 0;
  // dlogits = dloss * (softmax - onehot) from logits and lse, written over the whole
  // row (padding columns get 0; no onehot for a target >= vocab_size). dlogits may alias logits: the probabilities are never
  // stored, the logits buffer turns into its own gradient.
  virtual void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits,
                                      const Tensor& lse, const Tensor& targets,
                                      int64_t vocab_size, double dloss) = 0;

  // ---- optimizer ----------------------------------------------------------------
  // AdamW with decoupled weight decay over every parameter tensor in one call: master,
  // grad, m and v are the flat F32 buffers; segments the [n, 3] I64 table; step.weight_decay
  // applies to segments with decay = 1; each gradient is read times step.grad_scale. When param_copy is given (mixed precision), the
  // updated weights are also written to it in its dtype.
  virtual void adamw(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                     const Tensor& param_copy, const Tensor& segments, const AdamWStep& step) = 0;
  // On the optimizer's scalars (F64 [kOptimizerScalars], optimizer_scalars.h): the gradient
  // norm, the factor AdamW reads each gradient with and the skip, from the squared norm, the
  // loss scale and the clip threshold there (clip_rule), without waiting.
  virtual void clip_factor(const Tensor& scalars) = 0;

  // ---- graphs -------------------------------------------------------------------
  // Captures the ops `queue` calls into a graph, running none of them. Null, with the reason
  // in `why` (one line), where the backend cannot (the CPU runs each op as it is called) or
  // where something `queue` does cannot be captured: anything that waits for the device,
  // such as a copy to the host. The ops are usable afterwards either way.
  virtual std::unique_ptr<OpGraph> capture(const std::function<void()>& queue, std::string& why) = 0;
};

// The CPU backend (kernels/cpu/), checked.
std::unique_ptr<Ops> make_cpu_ops(int threads);

// The CUDA backend (kernels/cuda/, the kiln_cuda library), checked, in builds with CUDA
// (KILN_HAVE_CUDA defined).
int cuda_device_count();
std::unique_ptr<Ops> make_cuda_ops(int device, AttentionChoice attention);
// The device's PCI bus id ("0000:3B:00.0"), which names the same GPU to NVML.
std::string cuda_pci_bus_id(int device);

}  // namespace kiln
