#include "kernels/profiled_ops.h"

#include <algorithm>

namespace kiln {
namespace {

// ---- what each op costs at the least --------------------------------------------------
// FLOPs are counted only for the tensor-core work (matmul, attention), whose floor is the
// measured GEMM ceiling. Every other op does a few arithmetic operations per element on the
// CUDA cores, far below its memory time on any GPU: it records 0 FLOPs and its floor is its
// bytes over the memory bandwidth.
double matmul_flops(int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}
// Causal attention: S = QK^T and O = PV are 2·T²·D FLOPs each per head, and the causal mask
// keeps half of the T² scores: 4·B·H·T²·D / 2. Document resets (key_starts) are ignored,
// which overstates the work of packed rows.
double attention_forward_flops(const Tensor& qkv, AttentionShape shape) {
  const double b = static_cast<double>(qkv.shape[0]), t = static_cast<double>(qkv.shape[1]);
  return 4.0 * b * shape.n_head * t * t * shape.head_dim / 2;
}
// Backward recomputes S (1 product) and forms dV, dP, dS·K = dQ and dS^T·Q = dK (4): 5
// products against forward's 2, 2.5 times its FLOPs (FlashAttention-2's count).
constexpr double kAttentionBackwardRatio = 2.5;
// A ring block counts its whole Tq x Tk products: a block on the diagonal does half of them
// and one above it none (each rank meets cp of those over a layer's ring), which overstates
// the work by the same half a causal sequence has.
double ring_block_flops(const Tensor& qkv, const Tensor& kv, AttentionShape shape) {
  const double b = static_cast<double>(qkv.shape[0]);
  return 4.0 * b * shape.n_head * static_cast<double>(qkv.shape[1]) * static_cast<double>(kv.shape[1]) *
         shape.head_dim;
}
// Decoding: query t of T attends to the pos + t + 1 cached keys, 4·D FLOPs per (query, key).
double attention_decode_flops(const Tensor& qkv, int64_t pos, AttentionShape shape) {
  const double b = static_cast<double>(qkv.shape[0]), t = static_cast<double>(qkv.shape[1]);
  return 4.0 * b * shape.n_head * shape.head_dim * t * (static_cast<double>(pos) + (t + 1) / 2);
}

// Bytes of a tensor read or written once (0 for an absent one).
double bytes(const Tensor& x) { return x.empty() ? 0 : static_cast<double>(x.bytes()); }
// Bytes of `elements` values of `like`'s dtype: the gathered rows of an embedding table.
double bytes(int64_t elements, const Tensor& like) {
  if (like.empty()) return 0;
  return static_cast<double>(elements) * static_cast<double>(dtype_size(like.dtype));
}
// Query and key heads of a qkv tensor: what RoPE turns.
int64_t rotated_elements(const Tensor& qkv, AttentionShape shape) {
  return qkv.shape.rows() * (shape.n_head + shape.n_kv_head) * shape.head_dim;
}

// ---- record labels ----------------------------------------------------------------------
std::string dims(const Shape& shape) {
  std::string s;
  for (int i = 0; i < shape.rank; ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}
std::string label(const Tensor& x) { return dims(x.shape) + " " + dtype_name(x.dtype); }

// A linear layer's products: out[N, width] = x[N, in] weight[width, in]^T, labelled as
// matmul labels that product ("MxNxK dtype->dtype nt").
std::string linear_label(const Tensor& x, const Tensor& weight, const Tensor& out) {
  return std::to_string(x.shape.rows()) + "x" + std::to_string(weight.shape.rows()) + "x" +
         std::to_string(x.shape.cols()) + " " + dtype_name(x.dtype) + "->" +
         dtype_name(out.dtype) + " nt";
}

}  // namespace

std::vector<OpProfile> ProfiledOps::report() const {
  std::vector<OpProfile> out;
  for (const auto& entry : records_) {
    out.push_back(entry.second);
    out.back().op = entry.first.first;
    out.back().shape = entry.first.second;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });
  return out;
}

void ProfiledOps::copy_to_host(void* host, const Tensor& src) {
  timed("copy_to_host", label(src), 0, bytes(src), [&] { inner_.copy_to_host(host, src); });
}

void ProfiledOps::copy_from_host(const Tensor& dst, const void* host) {
  timed("copy_from_host", label(dst), 0, bytes(dst), [&] { inner_.copy_from_host(dst, host); });
}

void ProfiledOps::copy_from_pinned(const Tensor& dst, const void* host) {
  timed("copy_from_pinned", label(dst), 0, bytes(dst), [&] { inner_.copy_from_pinned(dst, host); });
}

void ProfiledOps::fill(const Tensor& x, double value) {
  timed("fill", label(x), 0, bytes(x), [&] { inner_.fill(x, value); });
}

void ProfiledOps::fill_normal(const Tensor& x, const RandomRuns& runs, uint64_t seed, uint64_t stream,
                              double mean, double std) {
  timed("fill_normal", label(x), 0, bytes(runs.count(), x),
        [&] { inner_.fill_normal(x, runs, seed, stream, mean, std); });
}

void ProfiledOps::cast(const Tensor& out, const Tensor& x) {
  timed("cast", label(x) + "->" + dtype_name(out.dtype), 0, bytes(x) + bytes(out),
        [&] { inner_.cast(out, x); });
}

void ProfiledOps::matmul(const Tensor& out, const Tensor& a, bool transpose_a, const Tensor& b,
                         bool transpose_b, bool accumulate) {
  const int64_t m = out.shape.rows(), n = out.shape.cols();
  const int64_t k = transpose_a ? a.shape.rows() : a.shape.cols();
  const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" +
                            std::to_string(k) + " " + dtype_name(a.dtype) + "->" +
                            dtype_name(out.dtype) + " " + (transpose_a ? "t" : "n") +
                            (transpose_b ? "t" : "n") + (accumulate ? " +=" : "");
  const double out_bytes = bytes(out) * (accumulate ? 2 : 1);
  timed("matmul", shape, matmul_flops(m, n, k), bytes(a) + bytes(b) + out_bytes,
        [&] { inner_.matmul(out, a, transpose_a, b, transpose_b, accumulate); });
}

void ProfiledOps::add_bias(const Tensor& out, const Tensor& bias) {
  timed("add_bias", label(out), 0, 2 * bytes(out) + bytes(bias),
        [&] { inner_.add_bias(out, bias); });
}

void ProfiledOps::add_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) {
  timed("add_columns", label(out), 0, 3 * bytes(x), [&] { inner_.add_columns(out, x, first, factor); });
}

void ProfiledOps::copy_head_columns(const Tensor& out, const Tensor& x, const HeadColumns& columns) {
  const double moved = 2.0 * static_cast<double>(x.shape.rows() * columns.heads * columns.width) * dtype_size(x.dtype);
  timed("copy_head_columns", label(x), 0, moved, [&] { inner_.copy_head_columns(out, x, columns); });
}

void ProfiledOps::take_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) {
  timed("take_columns", label(x), 0, 2 * bytes(out), [&] { inner_.take_columns(out, x, first, factor); });
}

void ProfiledOps::dropout(const Tensor& out, const Tensor& x, const DropoutMask& mask, bool accumulate) {
  timed("dropout", label(x), 0, (accumulate ? 3 : 2) * bytes(out), [&] { inner_.dropout(out, x, mask, accumulate); });
}

void ProfiledOps::bias_backward(const Tensor& dbias, const Tensor& dout) {
  timed("bias_backward", label(dout), 0, bytes(dout) + 2 * bytes(dbias),
        [&] { inner_.bias_backward(dbias, dout); });
}

void ProfiledOps::add(const Tensor& out, const Tensor& a, const Tensor& b) {
  timed("add", label(out), 0, bytes(a) + bytes(b) + bytes(out), [&] { inner_.add(out, a, b); });
}

void ProfiledOps::scale(const Tensor& x, double factor) {
  timed("scale", label(x), 0, 2 * bytes(x), [&] { inner_.scale(x, factor); });
}

void ProfiledOps::sum_squares(const Tensor& sum, const Tensor& x) {
  timed("sum_squares", label(x), 0, bytes(x), [&] { inner_.sum_squares(sum, x); });
}

void ProfiledOps::matmul_bias(const Tensor& out, const Tensor& x, const Tensor& weight,
                              const Tensor& bias) {
  timed("matmul_bias", linear_label(x, weight, out),
        matmul_flops(x.shape.rows(), weight.shape.rows(), x.shape.cols()),
        bytes(x) + bytes(weight) + bytes(bias) + bytes(out),
        [&] { inner_.matmul_bias(out, x, weight, bias); });
}

void ProfiledOps::matmul_bias_gelu(const Tensor& out, const Tensor& pre, const Tensor& x,
                                   const Tensor& weight, const Tensor& bias) {
  timed("matmul_bias_gelu", linear_label(x, weight, out),
        matmul_flops(x.shape.rows(), weight.shape.rows(), x.shape.cols()),
        bytes(x) + bytes(weight) + bytes(bias) + bytes(pre) + bytes(out),
        [&] { inner_.matmul_bias_gelu(out, pre, x, weight, bias); });
}

// dweight[width, in] += dy^T x: labelled "widthxinxN ... tn +=" as matmul labels it.
void ProfiledOps::matmul_bias_grad(const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                                   const Tensor& x) {
  const int64_t width = dy.shape.cols(), in = x.shape.cols(), rows = x.shape.rows();
  const std::string shape = std::to_string(width) + "x" + std::to_string(in) + "x" +
                            std::to_string(rows) + " " + dtype_name(x.dtype) + "->" +
                            dtype_name(dweight.dtype) + " tn +=";
  timed("matmul_bias_grad", shape, matmul_flops(width, in, rows),
        bytes(dy) + bytes(x) + 2 * (bytes(dweight) + bytes(dbias)),
        [&] { inner_.matmul_bias_grad(dweight, dbias, dy, x); });
}

// dx[N, in] = gelu'(pre) * (dy[N, width] weight[width, in]): "Nxinxwidth ... nn".
void ProfiledOps::matmul_dgelu(const Tensor& dx, const Tensor& dy, const Tensor& weight,
                               const Tensor& pre) {
  const int64_t rows = dy.shape.rows(), width = dy.shape.cols(), in = dx.shape.cols();
  const std::string shape = std::to_string(rows) + "x" + std::to_string(in) + "x" +
                            std::to_string(width) + " " + dtype_name(dy.dtype) + "->" +
                            dtype_name(dx.dtype) + " nn";
  timed("matmul_dgelu", shape, matmul_flops(rows, in, width),
        bytes(dy) + bytes(weight) + bytes(pre) + bytes(dx),
        [&] { inner_.matmul_dgelu(dx, dy, weight, pre); });
}

void ProfiledOps::fp8_cast_transpose(const Tensor& codes, const Tensor& codes_t, const Tensor& meta,
                                     const Tensor& x) {
  timed("fp8_cast_transpose", label(x), 0, bytes(x) + bytes(codes) + bytes(codes_t),
        [&] { inner_.fp8_cast_transpose(codes, codes_t, meta, x); });
}

void ProfiledOps::fp8_current_scale(const Tensor& meta, const Tensor& x, DType format, int margin) {
  timed("fp8_current_scale", label(x), 0, bytes(x), [&] { inner_.fp8_current_scale(meta, x, format, margin); });
}

// out[M, N] = a[M, K] b[N, K]^T in FP8: "MxNxK e4m3.e4m3->bf16 nt".
void ProfiledOps::fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b,
                             const Tensor& b_meta, bool accumulate) {
  const int64_t m = a.shape.rows(), n = b.shape.rows(), k = a.shape.cols();
  const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
                            dtype_name(a.dtype) + "." + dtype_name(b.dtype) + "->" + dtype_name(out.dtype) +
                            (accumulate ? " nt +=" : " nt");
  timed("fp8_matmul", shape, matmul_flops(m, n, k), bytes(a) + bytes(b) + (accumulate ? 2 : 1) * bytes(out),
        [&] { inner_.fp8_matmul(out, a, a_meta, b, b_meta, accumulate); });
}

void ProfiledOps::embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte,
                                    const Tensor& wpe, const Tensor& positions) {
  const double gathered = bytes(out.numel(), wte) + bytes(out.numel(), wpe);
  timed("embedding_forward", label(out), 0,
        bytes(tokens) + bytes(positions) + gathered + bytes(out),
        [&] { inner_.embedding_forward(out, tokens, wte, wpe, positions); });
}

void ProfiledOps::embedding_backward(const Tensor& dwte, const Tensor& dwpe,
                                     const Tensor& tokens, const Tensor& dout,
                                     const Tensor& positions) {
  // Each touched row of the gradient tables is read and written.
  const double touched = 2 * (bytes(dout.numel(), dwte) + bytes(dout.numel(), dwpe));
  timed("embedding_backward", label(dout), 0,
        bytes(tokens) + bytes(positions) + bytes(dout) + touched,
        [&] { inner_.embedding_backward(dwte, dwpe, tokens, dout, positions); });
}

void ProfiledOps::layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    double eps) {
  timed("layernorm_forward", label(x), 0,
        bytes(x) + bytes(weight) + bytes(bias) + bytes(out) + bytes(mean) + bytes(rstd),
        [&] { inner_.layernorm_forward(out, mean, rstd, x, weight, bias, eps); });
}

void ProfiledOps::layernorm_backward(const Tensor& dx, const Tensor& dweight,
                                     const Tensor& dbias, const Tensor& dout, const Tensor& x,
                                     const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd) {
  const double inputs = bytes(dout) + bytes(x) + bytes(weight) + bytes(mean) + bytes(rstd);
  timed("layernorm_backward", label(x), 0,
        inputs + 2 * (bytes(dx) + bytes(dweight) + bytes(dbias)),
        [&] { inner_.layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd); });
}

void ProfiledOps::rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                                  const Tensor& weight, double eps) {
  timed("rmsnorm_forward", label(x), 0, bytes(x) + bytes(weight) + bytes(out) + bytes(rstd),
        [&] { inner_.rmsnorm_forward(out, rstd, x, weight, eps); });
}

void ProfiledOps::rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout,
                                   const Tensor& x, const Tensor& weight, const Tensor& rstd) {
  const double inputs = bytes(dout) + bytes(x) + bytes(weight) + bytes(rstd);
  timed("rmsnorm_backward", label(x), 0, inputs + 2 * (bytes(dx) + bytes(dweight)),
        [&] { inner_.rmsnorm_backward(dx, dweight, dout, x, weight, rstd); });
}

void ProfiledOps::gelu_forward(const Tensor& out, const Tensor& x) {
  timed("gelu_forward", label(x), 0, bytes(x) + bytes(out), [&] { inner_.gelu_forward(out, x); });
}

void ProfiledOps::gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) {
  timed("gelu_backward", label(x), 0, bytes(x) + bytes(dout) + bytes(dx),
        [&] { inner_.gelu_backward(dx, x, dout); });
}

void ProfiledOps::route_tokens(const Tensor& choice, const Tensor& gate, const Tensor& stats, const Tensor& logits,
                               const Tensor& bias, const ExpertRoute& route) {
  timed("route_tokens", label(logits), 0, bytes(logits) + bytes(choice) + bytes(gate) + bytes(stats) + bytes(bias),
        [&] { inner_.route_tokens(choice, gate, stats, logits, bias, route); });
}

void ProfiledOps::route_rows(const Tensor& row, const Tensor& source, const Tensor& row_gate, const Tensor& offsets,
                             const Tensor& counts, const Tensor& choice, const Tensor& gate, const ExpertRoute& route) {
  // Each expert reads every choice; the rows written are at most the choices.
  timed("route_rows", label(choice), 0,
        static_cast<double>(route.experts) * bytes(choice) + 2 * bytes(gate) + 2 * bytes(row) + bytes(offsets) +
            bytes(counts),
        [&] { inner_.route_rows(row, source, row_gate, offsets, counts, choice, gate, route); });
}

void ProfiledOps::route_backward(const Tensor& d_logits, const Tensor& tally, const Tensor& d_gate,
                                 const Tensor& logits, const Tensor& choice, const Tensor& stats, const Tensor& shares,
                                 const ExpertRoute& route, const RouteLoss& loss) {
  timed("route_backward", label(logits), 0,
        bytes(logits) + bytes(d_logits) + bytes(d_gate) + bytes(choice) + bytes(stats) + bytes(shares),
        [&] { inner_.route_backward(d_logits, tally, d_gate, logits, choice, stats, shares, route, loss); });
}

void ProfiledOps::gather_rows(const Tensor& out, const Tensor& x, const Tensor& rows,
                              const Tensor& weights) {
  // Each output row reads one row of x (the rows it names, at most out's size).
  timed("gather_rows", label(out), 0, 2 * bytes(out) + bytes(rows) + bytes(weights),
        [&] { inner_.gather_rows(out, x, rows, weights); });
}

void ProfiledOps::combine_rows(const Tensor& out, const Tensor& x, const Tensor& rows,
                               const Tensor& weights, bool accumulate) {
  // Each index reads one row of x.
  timed("combine_rows", label(out), 0,
        bytes(rows.numel() * out.shape.cols(), x) + (accumulate ? 2 : 1) * bytes(out) +
            bytes(rows) + bytes(weights),
        [&] { inner_.combine_rows(out, x, rows, weights, accumulate); });
}

void ProfiledOps::row_dots(const Tensor& out, const Tensor& a, const Tensor& b,
                           const Tensor& rows) {
  timed("row_dots", label(a), 0,
        bytes(a) + bytes(rows.numel() * a.shape.cols(), b) + bytes(rows) + bytes(out),
        [&] { inner_.row_dots(out, a, b, rows); });
}

// The experts' products are labelled by their operands and the number of experts; their FLOPs
// are those of the products, whichever experts the rows went to.
void ProfiledOps::expert_matmul(const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                                const std::vector<int64_t>& offsets) {
  timed("expert_matmul",
        label(x) + " x " + std::to_string(offsets.size() - 1) + " experts " + (transpose_w ? "nt" : "nn"),
        matmul_flops(x.shape.rows(), out.shape.cols(), x.shape.cols()), bytes(x) + bytes(w) + bytes(out),
        [&] { inner_.expert_matmul(out, x, w, transpose_w, offsets); });
}

void ProfiledOps::expert_weight_grad(const Tensor& dw, const Tensor& dy, const Tensor& x,
                                     const std::vector<int64_t>& offsets) {
  timed("expert_weight_grad", label(x) + " x " + std::to_string(offsets.size() - 1) + " experts tn +=",
        matmul_flops(dy.shape.cols(), x.shape.cols(), x.shape.rows()), bytes(dy) + bytes(x) + 2 * bytes(dw),
        [&] { inner_.expert_weight_grad(dw, dy, x, offsets); });
}

void ProfiledOps::swiglu_forward(const Tensor& out, const Tensor& x) {
  timed("swiglu_forward", label(x), 0, bytes(x) + bytes(out),
        [&] { inner_.swiglu_forward(out, x); });
}

void ProfiledOps::swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) {
  timed("swiglu_backward", label(x), 0, bytes(x) + bytes(dout) + bytes(dx),
        [&] { inner_.swiglu_backward(dx, x, dout); });
}

void ProfiledOps::rope_forward(const Tensor& qkv, const Tensor& table, AttentionShape shape,
                               const Tensor& positions) {
  const double turned = 2 * bytes(rotated_elements(qkv, shape), qkv);
  timed("rope_forward", label(qkv), 0, turned + bytes(table) + bytes(positions),
        [&] { inner_.rope_forward(qkv, table, shape, positions); });
}

void ProfiledOps::rope_backward(const Tensor& dqkv, const Tensor& table, AttentionShape shape,
                                const Tensor& positions) {
  const double turned = 2 * bytes(rotated_elements(dqkv, shape), dqkv);
  timed("rope_backward", label(dqkv), 0, turned + bytes(table) + bytes(positions),
        [&] { inner_.rope_backward(dqkv, table, shape, positions); });
}

void ProfiledOps::attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv,
                                    AttentionShape shape, const Tensor& key_starts) {
  timed("attention_forward", label(qkv), attention_forward_flops(qkv, shape),
        bytes(qkv) + bytes(key_starts) + bytes(out) + bytes(lse),
        [&] { inner_.attention_forward(out, lse, qkv, shape, key_starts); });
}

void ProfiledOps::attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                     const Tensor& out, const Tensor& lse, AttentionShape shape,
                                     const Tensor& key_starts) {
  const double inputs = bytes(dout) + bytes(qkv) + bytes(out) + bytes(lse) + bytes(key_starts);
  timed("attention_backward", label(qkv),
        kAttentionBackwardRatio * attention_forward_flops(qkv, shape), inputs + bytes(dqkv),
        [&] { inner_.attention_backward(dqkv, dout, qkv, out, lse, shape, key_starts); });
}

void ProfiledOps::ring_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv,
                                         const Tensor& kv, const Tensor& q_index, const Tensor& k_index,
                                         AttentionShape shape, const Tensor& key_starts) {
  timed("ring_attention_forward", label(qkv), ring_block_flops(qkv, kv, shape),
        bytes(qkv) + bytes(kv) + bytes(key_starts) + 2 * (bytes(out) + bytes(lse)),
        [&] { inner_.ring_attention_forward(out, lse, qkv, kv, q_index, k_index, shape, key_starts); });
}

void ProfiledOps::ring_attention_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout,
                                          const Tensor& qkv, const Tensor& kv, const Tensor& out,
                                          const Tensor& lse, const Tensor& q_index, const Tensor& k_index,
                                          AttentionShape shape, const Tensor& key_starts) {
  const double inputs = bytes(dout) + bytes(qkv) + bytes(kv) + bytes(out) + bytes(lse) + bytes(key_starts);
  timed("ring_attention_backward", label(qkv), kAttentionBackwardRatio * ring_block_flops(qkv, kv, shape),
        inputs + 2 * (bytes(dqkv) + bytes(dkv)), [&] {
          inner_.ring_attention_backward(dqkv, dkv, dout, qkv, kv, out, lse, q_index, k_index, shape, key_starts);
        });
}

void ProfiledOps::split_kv(const Tensor& kv, const Tensor& qkv, AttentionShape shape) {
  timed("split_kv", label(qkv), 0, 2 * bytes(kv), [&] { inner_.split_kv(kv, qkv, shape); });
}

void ProfiledOps::add_kv_gradient(const Tensor& dqkv, const Tensor& dkv, AttentionShape shape) {
  timed("add_kv_gradient", label(dqkv), 0, 3 * bytes(dkv), [&] { inner_.add_kv_gradient(dqkv, dkv, shape); });
}

void ProfiledOps::attention_decode(const Tensor& out, const Tensor& k_cache,
                                   const Tensor& v_cache, const Tensor& qkv, int64_t pos,
                                   AttentionShape shape) {
  // The cache rows [0, pos + T) of both caches are read; the new T rows are also written.
  const int64_t t = qkv.shape[1];
  const int64_t row = k_cache.shape.cols() * k_cache.shape[0];
  const double cache = bytes(row * (pos + t), k_cache) + bytes(row * (pos + t), v_cache) +
                       bytes(row * t, k_cache) + bytes(row * t, v_cache);
  timed("attention_decode", label(qkv), attention_decode_flops(qkv, pos, shape),
        bytes(qkv) + bytes(out) + cache,
        [&] { inner_.attention_decode(out, k_cache, v_cache, qkv, pos, shape); });
}

void ProfiledOps::cross_entropy_forward(const Tensor& losses, const Tensor& lse,
                                        const Tensor& logits, const Tensor& targets,
                                        int64_t vocab_size) {
  timed("cross_entropy_forward", label(logits), 0,
        bytes(logits) + bytes(targets) + bytes(losses) + bytes(lse),
        [&] { inner_.cross_entropy_forward(losses, lse, logits, targets, vocab_size); });
}

void ProfiledOps::cross_entropy_backward(const Tensor& dlogits, const Tensor& logits,
                                         const Tensor& lse, const Tensor& targets,
                                         int64_t vocab_size, double dloss) {
  timed("cross_entropy_backward", label(logits), 0,
        bytes(logits) + bytes(lse) + bytes(targets) + bytes(dlogits), [&] {
          inner_.cross_entropy_backward(dlogits, logits, lse, targets, vocab_size, dloss);
        });
}

void ProfiledOps::adamw(const Tensor& master, const Tensor& grad, const Tensor& m,
                        const Tensor& v, const Tensor& param_copy, const Tensor& segments,
                        const AdamWStep& step) {
  // master, m and v are read and written; grad and the segment table read; the copy written.
  const double state = 2 * (bytes(master) + bytes(m) + bytes(v));
  timed("adamw", label(master), 0, state + bytes(grad) + bytes(segments) + bytes(param_copy),
        [&] { inner_.adamw(master, grad, m, v, param_copy, segments, step); });
}

void ProfiledOps::clip_factor(const Tensor& scalars) {
  timed("clip_factor", label(scalars), 0, 2 * bytes(scalars), [&] { inner_.clip_factor(scalars); });
}

}  // namespace kiln
