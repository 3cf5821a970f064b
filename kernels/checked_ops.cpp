#include "kernels/checked_ops.h"

#include <string>
#include <utility>

#include "base/check.h"
#include "kernels/fp8_meta.h"
#include "kernels/op_checks.h"

namespace kiln {

CheckedOps::CheckedOps(std::unique_ptr<Ops> backend)
    : backend_(std::move(backend)), device_(backend_->device()) {}

void CheckedOps::cast(const Tensor& out, const Tensor& x) {
  KILN_CHECK(out.numel() == x.numel(), "cast: element counts differ");
  backend_->cast(out, x);
}

void CheckedOps::fill_normal(const Tensor& x, const RandomRuns& runs, uint64_t seed, uint64_t stream,
                             double mean, double std) {
  check_random_runs(x, runs, "fill_normal");
  backend_->fill_normal(x, runs, seed, stream, mean, std);
}

void CheckedOps::matmul(const Tensor& out, const Tensor& a, bool ta, const Tensor& b, bool tb,
                        bool accumulate) {
  const int64_t M = ta ? a.shape.cols() : a.shape.rows();
  const int64_t K = ta ? a.shape.rows() : a.shape.cols();
  const int64_t Kb = tb ? b.shape.cols() : b.shape.rows();
  const int64_t N = tb ? b.shape.rows() : b.shape.cols();
  KILN_CHECK(K == Kb && out.shape.rows() == M && out.shape.cols() == N && a.dtype == b.dtype &&
                 (out.dtype == a.dtype || out.dtype == wide(a.dtype)),
             "matmul: " + a.shape.str() + (ta ? "^T" : "") + " x " + b.shape.str() + (tb ? "^T" : "") +
                 " -> " + out.shape.str());
  backend_->matmul(out, a, ta, b, tb, accumulate);
}

void CheckedOps::add_bias(const Tensor& out, const Tensor& bias) {
  KILN_CHECK(out.shape.cols() == bias.numel(), "add_bias: width mismatch");
  backend_->add_bias(out, bias);
}

namespace {
// whole [N, C] and part [N, c] of one dtype, columns [first, first + c) within C.
void check_columns(const Tensor& whole, const Tensor& part, int64_t first, const char* op) {
  KILN_CHECK(whole.shape.rows() == part.shape.rows() && first >= 0 &&
                 first + part.shape.cols() <= whole.shape.cols() && whole.dtype == part.dtype,
             std::string(op) + ": columns [" + std::to_string(first) + ", +" + std::to_string(part.shape.cols()) +
                 ") of " + whole.shape.str() + " as " + part.shape.str());
}
}  // namespace

void CheckedOps::add_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) {
  check_columns(out, x, first, "add_columns");
  backend_->add_columns(out, x, first, factor);
}

void CheckedOps::copy_head_columns(const Tensor& out, const Tensor& x, const HeadColumns& k) {
  // The last head's block ends within its row (the first's, with stride 0).
  const auto fits = [&](const Tensor& t, int64_t first, int64_t stride) {
    return first >= 0 && stride >= 0 && first + (k.heads - 1) * stride + k.width <= t.shape.cols();
  };
  KILN_CHECK(out.data != x.data && out.shape.rows() == x.shape.rows() && out.dtype == x.dtype && k.heads >= 1 &&
                 k.width >= 0 && fits(out, k.out_first, k.out_stride) && fits(x, k.x_first, k.x_stride) &&
                 (k.out_stride == 0 || k.out_stride >= k.width),
             "copy_head_columns: " + std::to_string(k.heads) + " blocks of " + std::to_string(k.width) + " from " +
                 x.shape.str() + " at " + std::to_string(k.x_first) + " + h " + std::to_string(k.x_stride) + " to " +
                 out.shape.str() + " at " + std::to_string(k.out_first) + " + h " + std::to_string(k.out_stride));
  backend_->copy_head_columns(out, x, k);
}

void CheckedOps::take_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) {
  check_columns(x, out, first, "take_columns");
  backend_->take_columns(out, x, first, factor);
}

void CheckedOps::dropout(const Tensor& out, const Tensor& x, const DropoutMask& mask, bool accumulate) {
  KILN_CHECK(out.dtype == x.dtype && out.shape.rows() == x.shape.rows() && out.shape.cols() == x.shape.cols(),
             "dropout: " + x.shape.str() + " -> " + out.shape.str());
  KILN_CHECK(mask.p >= 0 && mask.p < 1, "dropout: p=" + std::to_string(mask.p) + " outside [0, 1)");
  KILN_CHECK(mask.tokens > 0 && x.shape.rows() % mask.tokens == 0 && mask.run > 0 && mask.tokens <= 2 * mask.run &&
                 mask.first_feature >= 0 && mask.first_feature + x.shape.cols() <= mask.features,
             "dropout: the mask does not name x's " + x.shape.str() + " elements");
  backend_->dropout(out, x, mask, accumulate);
}

void CheckedOps::bias_backward(const Tensor& dbias, const Tensor& dout) {
  KILN_CHECK(dout.shape.cols() == dbias.numel(), "bias_backward: width mismatch");
  backend_->bias_backward(dbias, dout);
}

void CheckedOps::add(const Tensor& out, const Tensor& a, const Tensor& b) {
  check_same_shape(out, a, "add");
  check_same_shape(out, b, "add");
  backend_->add(out, a, b);
}

void CheckedOps::sum_squares(const Tensor& sum, const Tensor& x) {
  KILN_CHECK(sum.dtype == DType::F64 && sum.numel() == 1, "sum_squares: sum must be one fp64 value");
  backend_->sum_squares(sum, x);
}

// A linear layer's tensors are of the compute dtype, its parameter gradients wide.
void CheckedOps::matmul_bias(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear(out, x, weight, &bias, "matmul_bias");
  expect_dtype({&out, &weight, &bias}, x.dtype, "matmul_bias");
  backend_->matmul_bias(out, x, weight, bias);
}

void CheckedOps::matmul_bias_gelu(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& weight,
                                  const Tensor& bias) {
  check_linear(out, x, weight, &bias, "matmul_bias_gelu");
  check_same_shape(pre, out, "matmul_bias_gelu");
  expect_dtype({&out, &weight, &bias}, x.dtype, "matmul_bias_gelu");
  backend_->matmul_bias_gelu(out, pre, x, weight, bias);
}

void CheckedOps::matmul_bias_grad(const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x) {
  check_linear(dy, x, dweight, &dbias, "matmul_bias_grad");
  expect_dtype({&dy}, x.dtype, "matmul_bias_grad");
  expect_dtype({&dweight, &dbias}, wide(x.dtype), "matmul_bias_grad");
  backend_->matmul_bias_grad(dweight, dbias, dy, x);
}

void CheckedOps::matmul_dgelu(const Tensor& dx, const Tensor& dy, const Tensor& weight, const Tensor& pre) {
  check_linear(dy, dx, weight, nullptr, "matmul_dgelu");
  check_same_shape(pre, dx, "matmul_dgelu");
  expect_dtype({&dx, &weight}, dy.dtype, "matmul_dgelu");
  backend_->matmul_dgelu(dx, dy, weight, pre);
}

void CheckedOps::fp8_cast_transpose(const Tensor& codes, const Tensor& codes_t, const Tensor& meta,
                                    const Tensor& x) {
  check_fp8_cast(codes, codes_t, meta, x);
  backend_->fp8_cast_transpose(codes, codes_t, meta, x);
}

void CheckedOps::fp8_current_scale(const Tensor& meta, const Tensor& x, DType format, int margin) {
  check_fp8_meta(meta, "fp8_current_scale");
  fp8_format(format, "fp8_current_scale");
  backend_->fp8_current_scale(meta, x, format, margin);
}

void CheckedOps::fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b,
                            const Tensor& b_meta, bool accumulate) {
  check_fp8_matmul(out, a, a_meta, b, b_meta);
  backend_->fp8_matmul(out, a, a_meta, b, b_meta, accumulate);
}

void CheckedOps::embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                                   const Tensor& positions) {
  KILN_CHECK(tokens.dtype == DType::I32 && tokens.shape.rank == 2 && out.shape.rows() == tokens.numel() &&
                 out.shape.cols() == wte.shape.cols(),
             "embedding_forward: shapes " + out.shape.str() + " " + tokens.shape.str());
  check_per_token(positions, tokens.shape[0], tokens.shape[1], "embedding_forward", "positions");
  backend_->embedding_forward(out, tokens, wte, wpe, positions);
}

void CheckedOps::embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& tokens,
                                    const Tensor& dout, const Tensor& positions) {
  check_per_token(positions, tokens.shape[0], tokens.shape[1], "embedding_backward", "positions");
  backend_->embedding_backward(dwte, dwpe, tokens, dout, positions);
}

void CheckedOps::layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                   const Tensor& weight, const Tensor& bias, double eps) {
  check_same_shape(out, x, "layernorm_forward");
  backend_->layernorm_forward(out, mean, rstd, x, weight, bias, eps);
}

void CheckedOps::layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                    const Tensor& dout, const Tensor& x, const Tensor& weight,
                                    const Tensor& mean, const Tensor& rstd) {
  if (!dx.empty()) check_same_shape(dx, x, "layernorm_backward");
  check_same_shape(dout, x, "layernorm_backward");
  backend_->layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd);
}

void CheckedOps::rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                                 double eps) {
  check_same_shape(out, x, "rmsnorm_forward");
  backend_->rmsnorm_forward(out, rstd, x, weight, eps);
}

void CheckedOps::rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout, const Tensor& x,
                                  const Tensor& weight, const Tensor& rstd) {
  if (!dx.empty()) check_same_shape(dx, x, "rmsnorm_backward");
  check_same_shape(dout, x, "rmsnorm_backward");
  backend_->rmsnorm_backward(dx, dweight, dout, x, weight, rstd);
}

void CheckedOps::gelu_forward(const Tensor& out, const Tensor& x) {
  check_same_shape(out, x, "gelu_forward");
  backend_->gelu_forward(out, x);
}

void CheckedOps::gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) {
  check_same_shape(dx, x, "gelu_backward");
  check_same_shape(dout, x, "gelu_backward");
  backend_->gelu_backward(dx, x, dout);
}

void CheckedOps::swiglu_forward(const Tensor& out, const Tensor& x) {
  KILN_CHECK(x.shape.rows() == out.shape.rows() && x.shape.cols() == 2 * out.shape.cols() && x.dtype == out.dtype,
             "swiglu_forward: " + x.shape.str() + " -> " + out.shape.str());
  backend_->swiglu_forward(out, x);
}

void CheckedOps::swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) {
  check_same_shape(dx, x, "swiglu_backward");
  KILN_CHECK(x.shape.cols() == 2 * dout.shape.cols(), "swiglu_backward: width mismatch");
  backend_->swiglu_backward(dx, x, dout);
}

void CheckedOps::check_rope(const Tensor& qkv, const Tensor& table, AttentionShape s,
                            const Tensor& positions) const {
  check_heads(qkv, s);
  KILN_CHECK(s.rotated_dim() % 2 == 0 && s.rotated_dim() <= s.head_dim && table.shape.rank == 3 &&
                 table.shape[0] >= qkv.shape[1] && table.shape[1] == s.rotated_dim() / 2 &&
                 table.dtype == wide(qkv.dtype),
             "rope: table " + table.shape.str() + " does not match the heads");
  check_per_token(positions, qkv.shape[0], qkv.shape[1], "rope", "positions");
}

void CheckedOps::rope_forward(const Tensor& qkv, const Tensor& table, AttentionShape s, const Tensor& positions) {
  check_rope(qkv, table, s, positions);
  backend_->rope_forward(qkv, table, s, positions);
}

void CheckedOps::rope_backward(const Tensor& dqkv, const Tensor& table, AttentionShape s,
                               const Tensor& positions) {
  check_rope(dqkv, table, s, positions);
  backend_->rope_backward(dqkv, table, s, positions);
}

void CheckedOps::attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, AttentionShape s,
                                   const Tensor& key_starts) {
  check_heads(qkv, s);
  const int64_t batch = qkv.shape[0], seq = qkv.shape[1];
  KILN_CHECK(out.numel() == batch * seq * s.n_head * s.head_dim && lse.numel() == batch * s.n_head * seq &&
                 out.dtype == qkv.dtype,
             "attention_forward: output shapes");
  check_per_token(key_starts, batch, seq, "attention_forward", "key_starts");
  backend_->attention_forward(out, lse, qkv, s, key_starts);
}

void CheckedOps::attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                    const Tensor& lse, AttentionShape s, const Tensor& key_starts) {
  check_heads(qkv, s);
  check_same_shape(dqkv, qkv, "attention_backward");
  check_same_shape(dout, out, "attention_backward");
  check_per_token(key_starts, qkv.shape[0], qkv.shape[1], "attention_backward", "key_starts");
  backend_->attention_backward(dqkv, dout, qkv, out, lse, s, key_starts);
}

void CheckedOps::ring_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, const Tensor& kv,
                                        const Tensor& q_index, const Tensor& k_index, AttentionShape s,
                                        const Tensor& key_starts) {
  check_heads(qkv, s);
  check_ring_block(qkv, kv, q_index, k_index, key_starts, s, "ring_attention_forward");
  const int64_t batch = qkv.shape[0], seq = qkv.shape[1];
  KILN_CHECK(out.numel() == batch * seq * s.n_head * s.head_dim && lse.numel() == batch * s.n_head * seq &&
                 out.dtype == qkv.dtype && lse.dtype == wide(qkv.dtype),
             "ring_attention_forward: output shapes");
  backend_->ring_attention_forward(out, lse, qkv, kv, q_index, k_index, s, key_starts);
}

void CheckedOps::ring_attention_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout,
                                         const Tensor& qkv, const Tensor& kv, const Tensor& out, const Tensor& lse,
                                         const Tensor& q_index, const Tensor& k_index, AttentionShape s,
                                         const Tensor& key_starts) {
  check_heads(qkv, s);
  check_ring_block(qkv, kv, q_index, k_index, key_starts, s, "ring_attention_backward");
  check_same_shape(dqkv, qkv, "ring_attention_backward");
  check_same_shape(dkv, kv, "ring_attention_backward");
  check_same_shape(dout, out, "ring_attention_backward");
  const int64_t batch = qkv.shape[0], seq = qkv.shape[1];
  KILN_CHECK(out.numel() == batch * seq * s.n_head * s.head_dim && lse.numel() == batch * s.n_head * seq &&
                 lse.dtype == wide(qkv.dtype),
             "ring_attention_backward: output shapes");
  backend_->ring_attention_backward(dqkv, dkv, dout, qkv, kv, out, lse, q_index, k_index, s, key_starts);
}

void CheckedOps::split_kv(const Tensor& kv, const Tensor& qkv, AttentionShape s) {
  check_heads(qkv, s);
  check_kv_of(kv, qkv, s, "split_kv");
  backend_->split_kv(kv, qkv, s);
}

void CheckedOps::add_kv_gradient(const Tensor& dqkv, const Tensor& dkv, AttentionShape s) {
  check_heads(dqkv, s);
  check_kv_of(dkv, dqkv, s, "add_kv_gradient");
  backend_->add_kv_gradient(dqkv, dkv, s);
}

void CheckedOps::attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                                  const Tensor& qkv, int64_t pos, AttentionShape s) {
  check_attention_decode(out, k_cache, v_cache, qkv, pos, s);
  check_heads(qkv, s);
  backend_->attention_decode(out, k_cache, v_cache, qkv, pos, s);
}

void CheckedOps::route_tokens(const Tensor& choice, const Tensor& gate, const Tensor& stats, const Tensor& logits,
                              const Tensor& bias, const ExpertRoute& route) {
  check_route(route, &logits, logits.shape.rows(), choice, "route_tokens");
  const DType stat = wide(logits.dtype);
  check_route_values(gate, choice.numel(), stat, "route_tokens", "gates");
  check_route_values(stats, route.experts + 2, stat, "route_tokens", "statistics");
  check_route_values(bias, route.experts, stat, "route_tokens", "the selection bias");
  backend_->route_tokens(choice, gate, stats, logits, bias, route);
}

void CheckedOps::route_rows(const Tensor& row, const Tensor& source, const Tensor& row_gate, const Tensor& offsets,
                            const Tensor& counts, const Tensor& choice, const Tensor& gate, const ExpertRoute& route) {
  const int64_t N = route.top_k > 0 ? choice.numel() / route.top_k : 0;
  check_route(route, nullptr, N, choice, "route_rows");
  KILN_CHECK(gate.dtype == DType::F32 || gate.dtype == DType::F64,
             std::string("route_rows: gates must be fp32 or fp64, got ") + dtype_name(gate.dtype));
  check_route_values(gate, choice.numel(), gate.dtype, "route_rows", "gates");
  check_route_values(row, choice.numel(), DType::I32, "route_rows", "the choices' rows");
  check_route_values(offsets, route.experts + 1, DType::I32, "route_rows", "offsets");
  check_route_values(counts, 2 * route.experts, gate.dtype, "route_rows", "counts");
  const int64_t M = route.most_rows(N);
  KILN_CHECK(source.dtype == DType::I32 && source.numel() >= M && row_gate.dtype == gate.dtype &&
                 row_gate.numel() >= M,
             "route_rows: " + std::to_string(N) + " tokens' rows need " + std::to_string(M) +
                 " sources and gates, got " + source.shape.str() + " and " + row_gate.shape.str());
  backend_->route_rows(row, source, row_gate, offsets, counts, choice, gate, route);
}

void CheckedOps::route_backward(const Tensor& d_logits, const Tensor& tally, const Tensor& d_gate,
                                const Tensor& logits, const Tensor& choice, const Tensor& stats, const Tensor& shares,
                                const ExpertRoute& route, const RouteLoss& loss) {
  check_route(route, &logits, logits.shape.rows(), choice, "route_backward");
  check_same_shape(d_logits, logits, "route_backward");
  const DType stat = wide(logits.dtype);
  check_route_values(d_gate, choice.numel(), stat, "route_backward", "the gates' gradients");
  check_route_values(stats, route.experts + 2, stat, "route_backward", "statistics");
  check_route_values(shares, route.experts, stat, "route_backward", "shares");
  if (!tally.empty()) check_route_values(tally, 2, stat, "route_backward", "the tally");
  KILN_CHECK(logits.shape.rows() == 0 || loss.tokens >= 1,
             "route_backward: the balancing loss covers " + std::to_string(loss.tokens) + " tokens");
  backend_->route_backward(d_logits, tally, d_gate, logits, choice, stats, shares, route, loss);
}

// A matrix's row indices per output row: k of combine_rows and row_dots (1 for gather_rows).
static int64_t indices_per_row(const Tensor& rows, const Tensor& out) {
  return out.shape.rows() > 0 ? rows.numel() / out.shape.rows() : 1;
}

void CheckedOps::gather_rows(const Tensor& out, const Tensor& x, const Tensor& rows, const Tensor& weights) {
  check_row_moves(out, x, rows, weights, wide(x.dtype), 1, "gather_rows");
  backend_->gather_rows(out, x, rows, weights);
}

void CheckedOps::combine_rows(const Tensor& out, const Tensor& x, const Tensor& rows, const Tensor& weights,
                              bool accumulate) {
  check_row_moves(out, x, rows, weights, wide(x.dtype), indices_per_row(rows, out), "combine_rows");
  backend_->combine_rows(out, x, rows, weights, accumulate);
}

void CheckedOps::expert_matmul(const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                               const std::vector<int64_t>& offsets) {
  check_expert_groups(offsets, x, w, "expert_matmul");
  const int64_t W = w.shape.rows() / static_cast<int64_t>(offsets.size() - 1), D = w.shape.cols();
  KILN_CHECK(out.shape.rows() == x.shape.rows() && x.shape.cols() == (transpose_w ? D : W) &&
                 out.shape.cols() == (transpose_w ? W : D),
             "expert_matmul: " + x.shape.str() + " x experts' " + std::to_string(W) + "x" + std::to_string(D) +
                 (transpose_w ? "^T" : "") + " -> " + out.shape.str());
  expect_dtype({&out, &w}, x.dtype, "expert_matmul");
  backend_->expert_matmul(out, x, w, transpose_w, offsets);
}

void CheckedOps::expert_weight_grad(const Tensor& dw, const Tensor& dy, const Tensor& x,
                                    const std::vector<int64_t>& offsets) {
  check_expert_groups(offsets, x, dw, "expert_weight_grad");
  const int64_t W = dw.shape.rows() / static_cast<int64_t>(offsets.size() - 1);
  KILN_CHECK(dy.shape.rows() == x.shape.rows() && dy.shape.cols() == W && x.shape.cols() == dw.shape.cols() &&
                 dy.dtype == x.dtype && (dw.dtype == x.dtype || dw.dtype == wide(x.dtype)),
             "expert_weight_grad: " + dy.shape.str() + "^T x " + x.shape.str() + " -> experts' " + std::to_string(W) +
                 "x" + std::to_string(dw.shape.cols()) + " of " + dw.shape.str());
  backend_->expert_weight_grad(dw, dy, x, offsets);
}

void CheckedOps::row_dots(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& rows) {
  // a's rows meet b's as gather's output meets its input; out has one value per index.
  check_row_moves(a, b, rows, out, wide(a.dtype), indices_per_row(rows, a), "row_dots");
  backend_->row_dots(out, a, b, rows);
}

void CheckedOps::cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits,
                                       const Tensor& targets, int64_t vocab_size) {
  check_loss_shapes(logits, targets, vocab_size);
  backend_->cross_entropy_forward(losses, lse, logits, targets, vocab_size);
}

void CheckedOps::cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                                        const Tensor& targets, int64_t vocab_size, double dloss) {
  check_loss_shapes(logits, targets, vocab_size);
  check_same_shape(dlogits, logits, "cross_entropy_backward");
  backend_->cross_entropy_backward(dlogits, logits, lse, targets, vocab_size, dloss);
}

void CheckedOps::adamw(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                       const Tensor& param_copy, const Tensor& segments, const AdamWStep& step) {
  check_same_shape(master, grad, "adamw");
  check_same_shape(master, m, "adamw");
  check_same_shape(master, v, "adamw");
  KILN_CHECK(segments.dtype == DType::I64 && segments.shape.rank == 2 && segments.shape[1] == 3,
             "adamw: segments must be an [n, 3] int64 table");
  if (!step.scalars.empty()) check_optimizer_scalars(step.scalars, "adamw");
  backend_->adamw(master, grad, m, v, param_copy, segments, step);
}

void CheckedOps::clip_factor(const Tensor& scalars) {
  check_optimizer_scalars(scalars, "clip_factor");
  backend_->clip_factor(scalars);
}

}  // namespace kiln
