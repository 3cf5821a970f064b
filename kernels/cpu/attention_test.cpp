// The CPU attention against a plain triple loop in double precision, in fp32 and fp64, at
// shapes that exercise the kernel's edges: sequences that are not a whole number of query
// blocks (or shorter than one), head dims that are not a whole number of vectors, grouped
// and multi-query heads. The gradient checks (op_gradients_test.cpp) hold the fp64 path to
// finite differences; this holds fp32, whose vectors and padding differ, to the same function.
// Each shape runs plain causal, with the key starts of packed documents, and with arbitrary
// key starts (any start <= its query, not ordered).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace kiln {
namespace {

struct Case {
  int64_t batch, seq;
  AttentionShape heads;
};

struct Result {
  std::vector<double> out, lse, dqkv;
};

// out, lse and dqkv of causal softmax attention, straight from the definition: query i
// attends to keys [starts[b * T + i], i], or [0, i] when starts is empty.
Result reference(const Case& c, const std::vector<double>& qkv, const std::vector<double>& dout,
                 const std::vector<int32_t>& starts) {
  const int64_t T = c.seq, H = c.heads.n_head, KV = c.heads.n_kv_head, D = c.heads.head_dim;
  const int64_t W = c.heads.qkv_width(), O = H * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Result r{std::vector<double>(c.batch * T * O), std::vector<double>(c.batch * H * T),
           std::vector<double>(qkv.size(), 0.0)};
  std::vector<double> p(T), dp(T);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / KV), qo = h * D, ko = (H + g) * D, vo = (H + KV + g) * D;
      auto at = [&](int64_t t, int64_t offset) { return (b * T + t) * W + offset; };
      for (int64_t i = 0; i < T; ++i) {
        const int64_t first = starts.empty() ? 0 : starts[b * T + i];
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = first; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qkv[at(i, qo) + d] * qkv[at(j, ko) + d];
          p[j] = scale * s;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = first; j <= i; ++j) sum += std::exp(p[j] - mx);
        const double lse = mx + std::log(sum);
        r.lse[(b * H + h) * T + i] = lse;
        for (int64_t j = first; j <= i; ++j) p[j] = std::exp(p[j] - lse);
        const double* g_out = &dout[(b * T + i) * O + h * D];
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = first; j <= i; ++j) o += p[j] * qkv[at(j, vo) + d];
          r.out[(b * T + i) * O + h * D + d] = o;
          delta += o * g_out[d];
        }
        for (int64_t j = first; j <= i; ++j) {
          dp[j] = 0;
          for (int64_t d = 0; d < D; ++d) {
            dp[j] += g_out[d] * qkv[at(j, vo) + d];
            r.dqkv[at(j, vo) + d] += p[j] * g_out[d];
          }
          const double ds = scale * p[j] * (dp[j] - delta);
          for (int64_t d = 0; d < D; ++d) {
            r.dqkv[at(i, qo) + d] += ds * qkv[at(j, ko) + d];
            r.dqkv[at(j, ko) + d] += ds * qkv[at(i, qo) + d];
          }
        }
      }
    }
  return r;
}

template <typename T>
void expect_near(const std::vector<T>& got, const std::vector<double>& want, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) /
                                std::max(1.0, std::abs(want[i])));
  EXPECT_LT(worst, tolerance) << what;
}

enum class Starts { Causal, Documents, Arbitrary };

// Key starts for every row: none; packed documents, each token ending one with probability
// 1/9 (documents of one token, and boundaries inside and at the edges of query blocks); or
// any start in [0, i] for query i.
std::vector<int32_t> key_starts(const Case& c, Starts kind, std::mt19937_64& rng) {
  if (kind == Starts::Causal) return {};
  std::vector<int32_t> starts(static_cast<size_t>(c.batch * c.seq));
  for (int64_t b = 0; b < c.batch; ++b) {
    int32_t document = 0;
    for (int64_t i = 0; i < c.seq; ++i) {
      const auto column = static_cast<int32_t>(i);
      starts[b * c.seq + i] = kind == Starts::Documents
                                  ? document
                                  : static_cast<int32_t>(rng() % (static_cast<uint64_t>(i) + 1));
      if (rng() % 9 == 0) document = column + 1;
    }
  }
  return starts;
}

template <typename T>
void check(const Case& c, DType dtype, double tolerance, Starts kind) {
  const char* kinds[] = {"causal", "documents", "arbitrary starts"};
  const std::string name = "batch " + std::to_string(c.batch) + " seq " + std::to_string(c.seq) +
                           " heads " + std::to_string(c.heads.n_head) + "/" +
                           std::to_string(c.heads.n_kv_head) + " head dim " +
                           std::to_string(c.heads.head_dim) + " " + dtype_name(dtype) + " " +
                           kinds[static_cast<int>(kind)];
  const int64_t W = c.heads.qkv_width(), O = c.heads.n_head * c.heads.head_dim;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> qkv(c.batch * c.seq * W), dout(c.batch * c.seq * O);
  for (double& v : qkv) v = 1.5 * normal(rng);  // scores of a few units: a peaked softmax
  for (double& v : dout) v = normal(rng);
  std::vector<int32_t> starts = key_starts(c, kind, rng);
  const Result want = reference(c, qkv, dout, starts);

  std::vector<T> tqkv(qkv.begin(), qkv.end()), tdout(dout.begin(), dout.end());
  std::vector<T> out(want.out.size()), lse(want.lse.size());
  // dqkv starts as NaN: backward must overwrite every element.
  std::vector<T> dqkv(qkv.size(), std::numeric_limits<T>::quiet_NaN());
  auto tensor = [&](std::vector<T>& v, Shape shape) {
    return Tensor{v.data(), dtype, shape, Device::Cpu};
  };
  const Tensor tstarts =
      starts.empty() ? Tensor{}
                     : Tensor{starts.data(), DType::I32, {c.batch, c.seq}, Device::Cpu};
  const std::unique_ptr<Ops> ops = make_cpu_ops(2);
  ops->reserve({c.batch, c.seq, c.heads});
  ops->attention_forward(tensor(out, {c.batch, c.seq, O}),
                         tensor(lse, {c.batch * c.heads.n_head * c.seq}),
                         tensor(tqkv, {c.batch, c.seq, W}), c.heads, tstarts);
  ops->attention_backward(tensor(dqkv, {c.batch, c.seq, W}), tensor(tdout, {c.batch, c.seq, O}),
                          tensor(tqkv, {c.batch, c.seq, W}), tensor(out, {c.batch, c.seq, O}),
                          tensor(lse, {c.batch * c.heads.n_head * c.seq}), c.heads, tstarts);
  expect_near(out, want.out, tolerance, "out, " + name);
  expect_near(lse, want.lse, tolerance, "lse, " + name);
  expect_near(dqkv, want.dqkv, tolerance, "dqkv, " + name);
}

const Case kCases[] = {
    {2, 128, {4, 4, 32}},  // the tiny config's shape
    {2, 37, {6, 2, 20}},   // a partial last block; head dim not a whole number of vectors
    {1, 5, {2, 1, 64}},    // shorter than one block, head dim above the sequence length
    {3, 33, {4, 1, 8}},    // multi-query; one row past two whole blocks
    {1, 1, {1, 1, 3}},     // one token
};

constexpr Starts kStarts[] = {Starts::Causal, Starts::Documents, Starts::Arbitrary};

TEST(Attention, MatchesReferenceFp32) {
  for (const Case& c : kCases)
    for (Starts kind : kStarts) check<float>(c, DType::F32, 2e-5, kind);
}

TEST(Attention, MatchesReferenceFp64) {
  for (const Case& c : kCases)
    for (Starts kind : kStarts) check<double>(c, DType::F64, 1e-12, kind);
}

// A query that attends to itself only (its start is its own column) gets its own value
// row, with lse the scaled score of that one key.
TEST(Attention, QueryAttendingToItselfCopiesItsValue) {
  const Case c{1, 20, {2, 1, 4}};
  std::vector<int32_t> starts(20);
  for (int32_t i = 0; i < 20; ++i) starts[static_cast<size_t>(i)] = i;
  const int64_t W = c.heads.qkv_width(), O = c.heads.n_head * c.heads.head_dim;
  std::vector<float> qkv(static_cast<size_t>(c.seq * W)), out(static_cast<size_t>(c.seq * O));
  std::vector<float> lse(static_cast<size_t>(c.heads.n_head * c.seq));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(int(i * 7 % 13) - 6) / 4;
  const std::unique_ptr<Ops> ops = make_cpu_ops(2);
  ops->reserve({c.batch, c.seq, c.heads});
  ops->attention_forward(Tensor{out.data(), DType::F32, {1, c.seq, O}, Device::Cpu},
                         Tensor{lse.data(), DType::F32, {c.heads.n_head * c.seq}, Device::Cpu},
                         Tensor{qkv.data(), DType::F32, {1, c.seq, W}, Device::Cpu}, c.heads,
                         Tensor{starts.data(), DType::I32, {1, c.seq}, Device::Cpu});
  for (int64_t t = 0; t < c.seq; ++t)
    for (int64_t h = 0; h < c.heads.n_head; ++h) {
      const float* q = &qkv[static_cast<size_t>(t * W + h * 4)];
      const float* k = &qkv[static_cast<size_t>(t * W + 2 * 4)];
      const float* v = &qkv[static_cast<size_t>(t * W + 3 * 4)];
      const float score = (q[0] * k[0] + q[1] * k[1] + q[2] * k[2] + q[3] * k[3]) / 2;
      EXPECT_NEAR(lse[static_cast<size_t>(h * c.seq + t)], score, 1e-5);
      for (int64_t d = 0; d < 4; ++d)
        EXPECT_NEAR(out[static_cast<size_t>(t * O + h * 4 + d)], v[d], 1e-6);
    }
}

}  // namespace
}  // namespace kiln
