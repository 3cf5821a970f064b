// Ring attention's blocks against whole-sequence attention (attention_test.cpp holds that to
// the definition): a sequence split as context parallelism splits it over cp ranks (2 cp
// chunks, rank r holding chunks r and 2 cp - 1 - r), each rank's queries meeting every rank's
// keys and values block by block, gives the whole sequence's output, log-sum-exp and
// gradients, in fp64 and fp32, causal and with the key starts of packed documents, with
// grouped-query heads.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <memory>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace kiln {
namespace {

struct Split {
  int64_t batch, seq;
  int cp;
  AttentionShape heads;
};

std::vector<double> random_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

// The whole sequence's token indices rank r holds, in its row order.
std::vector<int32_t> rank_tokens(int64_t seq, int cp, int r) {
  const int64_t chunk = seq / (2 * cp);
  std::vector<int32_t> tokens;
  for (int64_t c : {int64_t{r}, int64_t{2 * cp - 1 - r}})
    for (int64_t t = 0; t < chunk; ++t) tokens.push_back(static_cast<int32_t>(c * chunk + t));
  return tokens;
}

// Rows `tokens` of every sequence of a [B, T, width] array.
std::vector<double> rows_of(const std::vector<double>& whole, int64_t batch, int64_t seq, int64_t width,
                            const std::vector<int32_t>& tokens) {
  std::vector<double> rows;
  for (int64_t b = 0; b < batch; ++b)
    for (int32_t t : tokens)
      rows.insert(rows.end(), whole.begin() + (b * seq + t) * width, whole.begin() + (b * seq + t + 1) * width);
  return rows;
}

// Host arrays the CPU ops read and write in place, kept alive (and in place) by the deque.
template <typename T>
class Arrays {
 public:
  static constexpr DType kDtype = sizeof(T) == 8 ? DType::F64 : DType::F32;
  Tensor values(const std::vector<double>& v, Shape shape) {
    std::vector<T>& a = values_.emplace_back(v.begin(), v.end());
    return Tensor{a.data(), kDtype, shape, Device::Cpu};
  }
  Tensor filled(double value, Shape shape) {
    return values(std::vector<double>(static_cast<size_t>(shape.numel()), value), shape);
  }
  Tensor indices(const std::vector<int32_t>& v, Shape shape) {
    std::vector<int32_t>& a = indices_.emplace_back(v);
    return Tensor{a.data(), DType::I32, shape, Device::Cpu};
  }
  static std::vector<double> read(const Tensor& t) { return {t.as<T>(), t.as<T>() + t.numel()}; }

 private:
  std::deque<std::vector<T>> values_;
  std::deque<std::vector<int32_t>> indices_;
};

template <typename T>
void expect_whole(const Split& s, bool documents, double tolerance) {
  const std::unique_ptr<Ops> ops = make_cpu_ops(2);
  Arrays<T> arrays;
  const AttentionShape& h = s.heads;
  const int64_t B = s.batch, T_ = s.seq, W = h.qkv_width(), O = int64_t{h.n_head} * h.head_dim;
  const int64_t KV = 2 * int64_t{h.n_kv_head} * h.head_dim, local = T_ / s.cp;
  const std::vector<double> qkv = random_values(B * T_ * W, 1), dout = random_values(B * T_ * O, 2);
  // Documents of 5 tokens: each query starts at its document's first token.
  std::vector<int32_t> starts;
  if (documents)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T_; ++t) starts.push_back(static_cast<int32_t>(t / 5 * 5));

  // The whole sequence at once.
  const Tensor whole_qkv = arrays.values(qkv, {B, T_, W});
  const Tensor whole_out = arrays.filled(0, {B, T_, O}), whole_lse = arrays.filled(0, {B, h.n_head, T_});
  const Tensor whole_dout = arrays.values(dout, {B, T_, O}), whole_dqkv = arrays.filled(0, {B, T_, W});
  const Tensor whole_starts = documents ? arrays.indices(starts, {B, T_}) : Tensor{};
  ops->reserve({B, T_, h, Arrays<T>::kDtype});
  ops->attention_forward(whole_out, whole_lse, whole_qkv, h, whole_starts);
  ops->attention_backward(whole_dqkv, whole_dout, whole_qkv, whole_out, whole_lse, h, whole_starts);
  const std::vector<double> want_out = Arrays<T>::read(whole_out), want_lse = Arrays<T>::read(whole_lse);
  const std::vector<double> want_dqkv = Arrays<T>::read(whole_dqkv);

  // Each rank's rows, and its key and value heads as they would travel.
  std::vector<Tensor> rank_qkv, rank_kv, rank_out, rank_lse, rank_dout, rank_dqkv, rank_dkv, rank_index, rank_starts;
  for (int r = 0; r < s.cp; ++r) {
    const std::vector<int32_t> tokens = rank_tokens(T_, s.cp, r);
    rank_qkv.push_back(arrays.values(rows_of(qkv, B, T_, W, tokens), {B, local, W}));
    rank_kv.push_back(arrays.filled(0, {B, local, KV}));
    ops->split_kv(rank_kv.back(), rank_qkv.back(), h);
    rank_out.push_back(arrays.filled(0, {B, local, O}));
    rank_lse.push_back(arrays.filled(-std::numeric_limits<double>::infinity(), {B, h.n_head, local}));
    rank_dout.push_back(arrays.values(rows_of(dout, B, T_, O, tokens), {B, local, O}));
    rank_dqkv.push_back(arrays.filled(0, {B, local, W}));
    rank_dkv.push_back(arrays.filled(0, {B, local, KV}));
    rank_index.push_back(arrays.indices(tokens, {local}));
    std::vector<int32_t> mine;
    for (int64_t b = 0; documents && b < B; ++b)
      for (int32_t t : tokens) mine.push_back(starts[static_cast<size_t>(b * T_ + t)]);
    rank_starts.push_back(documents ? arrays.indices(mine, {B, local}) : Tensor{});
  }
  for (int r = 0; r < s.cp; ++r)
    for (int from = 0; from < s.cp; ++from)
      ops->ring_attention_forward(rank_out[r], rank_lse[r], rank_qkv[r], rank_kv[from], rank_index[r],
                                  rank_index[from], h, rank_starts[r]);
  for (int r = 0; r < s.cp; ++r)
    for (int from = 0; from < s.cp; ++from)
      ops->ring_attention_backward(rank_dqkv[r], rank_dkv[from], rank_dout[r], rank_qkv[r], rank_kv[from],
                                   rank_out[r], rank_lse[r], rank_index[r], rank_index[from], h, rank_starts[r]);
  for (int r = 0; r < s.cp; ++r) {
    ops->add_kv_gradient(rank_dqkv[r], rank_dkv[r], h);
    const std::vector<int32_t> tokens = rank_tokens(T_, s.cp, r);
    const std::vector<double> out = Arrays<T>::read(rank_out[r]), lse = Arrays<T>::read(rank_lse[r]);
    const std::vector<double> dqkv = Arrays<T>::read(rank_dqkv[r]);
    const std::vector<double> out_rows = rows_of(want_out, B, T_, O, tokens);
    const std::vector<double> dqkv_rows = rows_of(want_dqkv, B, T_, W, tokens);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], out_rows[i], tolerance) << "rank " << r << " out " << i;
    for (size_t i = 0; i < dqkv.size(); ++i)
      ASSERT_NEAR(dqkv[i], dqkv_rows[i], tolerance) << "rank " << r << " dqkv " << i;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t head = 0; head < h.n_head; ++head)
        for (int64_t i = 0; i < local; ++i)
          ASSERT_NEAR(lse[(b * h.n_head + head) * local + i], want_lse[(b * h.n_head + head) * T_ + tokens[i]],
                      tolerance)
              << "rank " << r << " lse of query " << i;
  }
}

TEST(RingAttention, TwoRanksGiveTheWholeSequence) {
  expect_whole<double>({2, 16, 2, {4, 2, 8}}, false, 1e-12);
  expect_whole<float>({2, 16, 2, {4, 2, 8}}, false, 2e-5);
}

TEST(RingAttention, FourRanksWithDocumentsGiveTheWholeSequence) {
  expect_whole<double>({2, 24, 4, {4, 1, 6}}, true, 1e-12);
  expect_whole<float>({2, 24, 4, {4, 1, 6}}, true, 2e-5);
}

TEST(RingAttention, TwoRanksWithDocumentsAndFullHeads) {
  expect_whole<double>({1, 20, 2, {2, 2, 5}}, true, 1e-12);
  expect_whole<float>({1, 20, 2, {2, 2, 5}}, true, 2e-5);
}

}  // namespace
}  // namespace kiln
