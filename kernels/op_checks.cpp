#include "kernels/op_checks.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace kiln {

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(a.shape == b.shape && a.dtype == b.dtype,
             std::string(op) + ": " + a.shape.str() + " vs " + b.shape.str());
}

void expect_dtype(std::initializer_list<const Tensor*> tensors, DType dtype, const char* op) {
  for (const Tensor* t : tensors)
    KILN_CHECK(t->dtype == dtype, std::string(op) + ": " + dtype_name(dtype) + " expected, got " +
                                      dtype_name(t->dtype));
}

void check_linear(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor* bias,
                  const char* op) {
  KILN_CHECK(!bias || !bias->empty(), std::string(op) + ": no bias given");
  KILN_CHECK(weight.shape.rank == 2 && x.shape.rows() == y.shape.rows() &&
                 x.shape.cols() == weight.shape.cols() && y.shape.cols() == weight.shape.rows() &&
                 (!bias || bias->numel() == weight.shape.rows()),
             std::string(op) + ": x " + x.shape.str() + ", weight " + weight.shape.str() +
                 (bias ? ", bias " + bias->shape.str() : std::string()) + " -> " + y.shape.str());
}

void check_per_token(const Tensor& values, int64_t batch, int64_t seq, const char* op, const char* name) {
  if (values.empty()) return;
  KILN_CHECK(values.dtype == DType::I32 && values.shape.rank == 2 && values.shape[0] == batch &&
                 values.shape[1] == seq,
             std::string(op) + ": " + name + " must be a [" + std::to_string(batch) + ", " +
                 std::to_string(seq) + "] int32 tensor, got " + values.shape.str() + " " +
                 dtype_name(values.dtype));
}

void check_heads(const Tensor& qkv, AttentionShape s) {
  KILN_CHECK(qkv.shape.rank == 3 && qkv.shape[2] == s.qkv_width(),
             "attention: qkv " + qkv.shape.str() + " does not match the heads");
  KILN_CHECK(s.n_kv_head > 0 && s.n_head % s.n_kv_head == 0, "attention: bad head counts");
}

void check_kv_of(const Tensor& kv, const Tensor& qkv, AttentionShape s, const char* op) {
  KILN_CHECK(qkv.shape.rank == 3 && kv.shape.rank == 3 && kv.shape[0] == qkv.shape[0] &&
                 kv.shape[1] == qkv.shape[1] && kv.shape[2] == 2 * int64_t{s.n_kv_head} * s.head_dim &&
                 kv.dtype == qkv.dtype,
             std::string(op) + ": kv " + kv.shape.str() + " does not hold the key and value heads of qkv " +
                 qkv.shape.str());
}

void check_ring_block(const Tensor& qkv, const Tensor& kv, const Tensor& q_index, const Tensor& k_index,
                      const Tensor& key_starts, AttentionShape s, const char* op) {
  KILN_CHECK(qkv.shape.rank == 3 && kv.shape.rank == 3 && kv.shape[0] == qkv.shape[0] &&
                 kv.shape[2] == 2 * int64_t{s.n_kv_head} * s.head_dim && kv.dtype == qkv.dtype,
             std::string(op) + ": kv " + kv.shape.str() + " is not a block of key and value heads for qkv " +
                 qkv.shape.str());
  const int64_t Tq = qkv.shape[1], Tk = kv.shape[1];
  const auto indices = [&](const Tensor& t, int64_t n, const char* name) {
    KILN_CHECK(t.dtype == DType::I32 && t.numel() == n,
               std::string(op) + ": " + name + " must hold " + std::to_string(n) + " int32 token indices, got " +
                   t.shape.str() + " " + dtype_name(t.dtype));
  };
  indices(q_index, Tq, "q_index");
  indices(k_index, Tk, "k_index");
  check_per_token(key_starts, qkv.shape[0], Tq, op, "key_starts");
}

void check_attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& qkv, int64_t pos, AttentionShape s) {
  check_same_shape(k_cache, v_cache, "attention_decode");
  KILN_CHECK(qkv.shape.rank == 3 && qkv.shape[2] == s.qkv_width(),
             "attention_decode: qkv " + qkv.shape.str() + " is not [batch, seq, " +
                 std::to_string(s.qkv_width()) + "]");
  const int64_t batch = qkv.shape[0], seq = qkv.shape[1];
  KILN_CHECK(k_cache.shape.rank == 3 && k_cache.shape[0] == batch &&
                 k_cache.shape[2] == s.n_kv_head * s.head_dim && k_cache.dtype == qkv.dtype &&
                 pos >= 0 && pos + seq <= k_cache.shape[1] &&
                 out.numel() == batch * seq * s.n_head * s.head_dim && out.dtype == qkv.dtype,
             "attention_decode: cache " + k_cache.shape.str() + " cannot take positions " +
                 std::to_string(pos) + ".." + std::to_string(pos + seq) + " of qkv " +
                 qkv.shape.str());
}

void check_route(const ExpertRoute& r, const Tensor* logits, int64_t tokens, const Tensor& choice, const char* op) {
  const bool grouped = r.groups >= 1 && r.experts % r.groups == 0 && r.groups_topk >= 1 && r.groups_topk <= r.groups &&
                       (r.groups == 1 || (r.top_k % r.groups_topk == 0 && r.top_k <= r.groups_topk * r.group_size()));
  KILN_CHECK(r.experts >= 1 && r.top_k >= 1 && r.top_k <= r.experts && grouped && r.capacity >= 0,
             std::string(op) + ": no top-" + std::to_string(r.top_k) + " choice of " + std::to_string(r.experts) +
                 " experts from " + std::to_string(r.groups_topk) + " of " + std::to_string(r.groups) + " groups");
  KILN_CHECK(!logits || (logits->shape.rows() == tokens && logits->shape.cols() == r.experts),
             std::string(op) + ": logits " + logits->shape.str() + " for " + std::to_string(r.experts) + " experts");
  KILN_CHECK(choice.dtype == DType::I32 && choice.numel() == tokens * r.top_k,
             std::string(op) + ": choices must be " + std::to_string(tokens * r.top_k) +
                 " int32 values, got " + choice.shape.str() + " " + dtype_name(choice.dtype));
}

void check_route_values(const Tensor& values, int64_t count, DType stat, const char* op, const char* name) {
  KILN_CHECK(values.dtype == stat && values.numel() == count,
             std::string(op) + ": " + name + " must be " + std::to_string(count) + " " + dtype_name(stat) +
                 " values, got " + values.shape.str() + " " + dtype_name(values.dtype));
}

void check_row_moves(const Tensor& out, const Tensor& x, const Tensor& rows,
                     const Tensor& weights, DType weight_dtype, int64_t k, const char* op) {
  KILN_CHECK(out.shape.cols() == x.shape.cols() && out.dtype == x.dtype,
             std::string(op) + ": " + out.shape.str() + " vs " + x.shape.str());
  KILN_CHECK(rows.dtype == DType::I32 && rows.numel() == out.shape.rows() * k,
             std::string(op) + ": row indices must be " + std::to_string(out.shape.rows() * k) +
                 " int32 values, got " + rows.shape.str() + " " + dtype_name(rows.dtype));
  KILN_CHECK(weights.empty() || (weights.dtype == weight_dtype && weights.numel() == rows.numel()),
             std::string(op) + ": weights must be " + std::to_string(rows.numel()) + " " +
                 dtype_name(weight_dtype) + " values, got " + weights.shape.str() + " " +
                 dtype_name(weights.dtype));
}

void check_expert_groups(const std::vector<int64_t>& offsets, const Tensor& grouped, const Tensor& stacked,
                         const char* op) {
  const int64_t experts = static_cast<int64_t>(offsets.size()) - 1;
  KILN_CHECK(experts >= 1 && offsets.front() == 0 && offsets.back() == grouped.shape.rows() &&
                 std::is_sorted(offsets.begin(), offsets.end()),
             std::string(op) + ": the experts' row offsets must ascend from 0 to the " +
                 std::to_string(grouped.shape.rows()) + " rows of " + grouped.shape.str());
  KILN_CHECK(stacked.shape.rows() % experts == 0,
             std::string(op) + ": a weight of " + std::to_string(stacked.shape.rows()) + " rows does not stack " +
                 std::to_string(experts) + " experts evenly");
}

void check_random_runs(const Tensor& x, const RandomRuns& r, const char* op) {
  KILN_CHECK(x.dtype != DType::I32 && x.dtype != DType::I64,
             std::string(op) + ": a floating tensor expected, got " + dtype_name(x.dtype));
  const bool apart = r.rows <= 1 || (r.stride >= r.cols && r.stream_stride >= r.cols);
  const bool inside = r.rows == 0 || r.cols == 0 || (r.rows - 1) * r.stride + r.cols <= x.numel();
  KILN_CHECK(r.rows >= 0 && r.cols >= 0 && r.first >= 0 && apart && inside,
             std::string(op) + ": " + std::to_string(r.rows) + " runs of " + std::to_string(r.cols) +
                 " elements, " + std::to_string(r.stride) + " apart in " + x.shape.str() + " and " +
                 std::to_string(r.stream_stride) + " apart in the stream from " + std::to_string(r.first) +
                 ", do not fit or overlap");
}

void check_optimizer_scalars(const Tensor& scalars, const char* op) {
  KILN_CHECK(scalars.dtype == DType::F64 && scalars.numel() == kOptimizerScalars,
             std::string(op) + ": the optimizer's scalars must be " + std::to_string(kOptimizerScalars) +
                 " fp64 values, got " + scalars.shape.str() + " " + dtype_name(scalars.dtype));
}

void check_loss_shapes(const Tensor& logits, const Tensor& targets, int64_t vocab) {
  KILN_CHECK(targets.dtype == DType::I32 && targets.numel() == logits.shape.rows() &&
                 vocab <= logits.shape.cols(),
             "cross_entropy: logits " + logits.shape.str() + " targets " + targets.shape.str());
}

}  // namespace kiln
