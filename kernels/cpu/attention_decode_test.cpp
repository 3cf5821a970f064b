// The CPU attention_decode against causal attention straight from its definition, in fp64
// and fp32: a sequence fed through the cache in chunks of several sizes (a prompt, single
// tokens) gives at every position what attention over the whole sequence gives, with
// grouped, multi-query and plain heads; the cache rows past the fed positions stay untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/check.h"
#include "kernels/ops.h"

namespace kiln {
namespace {

struct DecodeCase {
  int64_t batch, seq;
  AttentionShape heads;
};

// out[B, T, n_head * D] of causal softmax attention over qkv[B, T, width], in double.
std::vector<double> decode_reference(const DecodeCase& c, const std::vector<double>& qkv) {
  const int64_t T = c.seq, H = c.heads.n_head, KV = c.heads.n_kv_head, D = c.heads.head_dim;
  const int64_t W = c.heads.qkv_width(), O = H * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> out(static_cast<size_t>(c.batch * T * O)), p(static_cast<size_t>(T));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / KV), qo = h * D, ko = (H + g) * D, vo = (H + KV + g) * D;
      auto at = [&](int64_t t, int64_t offset) {
        return static_cast<size_t>((b * T + t) * W + offset);
      };
      for (int64_t i = 0; i < T; ++i) {
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qkv[at(i, qo + d)] * qkv[at(j, ko + d)];
          p[static_cast<size_t>(j)] = scale * s;
          mx = std::max(mx, scale * s);
        }
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(p[static_cast<size_t>(j)] - mx);
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j)
            o += std::exp(p[static_cast<size_t>(j)] - mx) / sum * qkv[at(j, vo + d)];
          out[static_cast<size_t>((b * T + i) * O + h * D + d)] = o;
        }
      }
    }
  return out;
}

template <typename T>
void check_case(const DecodeCase& c, const std::vector<int64_t>& chunks, double tolerance) {
  const int64_t W = c.heads.qkv_width(), O = c.heads.n_head * c.heads.head_dim;
  const int64_t KVW = c.heads.n_kv_head * c.heads.head_dim, capacity = c.seq + 3;
  const DType dtype = sizeof(T) == 8 ? DType::F64 : DType::F32;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  std::vector<double> qkv(static_cast<size_t>(c.batch * c.seq * W));
  for (double& v : qkv) v = normal(rng);
  const std::vector<double> want = decode_reference(c, qkv);

  auto ops = make_cpu_ops(2);
  const T sentinel = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> k_cache(static_cast<size_t>(c.batch * capacity * KVW), sentinel);
  std::vector<T> v_cache = k_cache;
  const Tensor k{k_cache.data(), dtype, {c.batch, capacity, KVW}, Device::Cpu};
  const Tensor v{v_cache.data(), dtype, {c.batch, capacity, KVW}, Device::Cpu};
  int64_t pos = 0;
  double worst = 0;
  for (int64_t n : chunks) {
    // The chunk's rows of every sequence, packed as [B, n, width].
    std::vector<T> part(static_cast<size_t>(c.batch * n * W)),
        out(static_cast<size_t>(c.batch * n * O));
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t i = 0; i < n * W; ++i)
        part[static_cast<size_t>(b * n * W + i)] =
            static_cast<T>(qkv[static_cast<size_t>((b * c.seq + pos) * W + i)]);
    ops->attention_decode(Tensor{out.data(), dtype, {c.batch, n, O}, Device::Cpu}, k, v,
                          Tensor{part.data(), dtype, {c.batch, n, W}, Device::Cpu}, pos, c.heads);
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t i = 0; i < n * O; ++i) {
        const double got = out[static_cast<size_t>(b * n * O + i)];
        const double expected = want[static_cast<size_t>((b * c.seq + pos) * O + i)];
        worst = std::max(worst, std::abs(got - expected));
      }
    pos += n;
  }
  ASSERT_EQ(pos, c.seq);
  EXPECT_LT(worst, tolerance) << "heads " << c.heads.n_head << "/" << c.heads.n_kv_head;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t r = c.seq; r < capacity; ++r)
      EXPECT_TRUE(std::isnan(k_cache[static_cast<size_t>((b * capacity + r) * KVW)]) &&
                  std::isnan(v_cache[static_cast<size_t>((b * capacity + r) * KVW)]))
          << "cache row " << r << " past the fed positions was written";
}

const std::vector<DecodeCase> kDecodeCases = {
    {2, 13, {4, 2, 8}},   // grouped-query
    {1, 9, {3, 1, 6}},    // multi-query, head dim not a power of two
    {3, 11, {2, 2, 16}},  // one kv head per query head
};
// A prompt of 5, two single tokens, a chunk of 4, ... until the sequence is fed.
std::vector<int64_t> mixed_chunks(int64_t seq) {
  const int64_t pattern[] = {5, 1, 1, 4};
  std::vector<int64_t> chunks;
  for (int64_t fed = 0, i = 0; fed < seq; ++i) {
    chunks.push_back(std::min(pattern[i % 4], seq - fed));
    fed += chunks.back();
  }
  return chunks;
}

TEST(AttentionDecode, MatchesCausalAttentionInDouble) {
  for (const DecodeCase& c : kDecodeCases) check_case<double>(c, mixed_chunks(c.seq), 1e-12);
}

TEST(AttentionDecode, MatchesCausalAttentionInFloat) {
  for (const DecodeCase& c : kDecodeCases) {
    std::vector<int64_t> chunks(static_cast<size_t>(c.seq), 1);  // one token at a time
    check_case<float>(c, chunks, 2e-6);
  }
}

TEST(AttentionDecode, RefusesACacheTooSmallForThePositions) {
  auto ops = make_cpu_ops(1);
  std::vector<float> qkv(2 * 8), out(2 * 4), k(3 * 2), v(3 * 2);
  const AttentionShape heads{2, 1, 2};
  try {
    ops->attention_decode(Tensor{out.data(), DType::F32, {1, 2, 4}, Device::Cpu},
                          Tensor{k.data(), DType::F32, {1, 3, 2}, Device::Cpu},
                          Tensor{v.data(), DType::F32, {1, 3, 2}, Device::Cpu},
                          Tensor{qkv.data(), DType::F32, {1, 2, 8}, Device::Cpu}, 2, heads);
    FAIL() << "positions 2..4 do not fit a cache of 3 rows";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "attention_decode: cache [1, 3, 2] cannot take positions 2..4 of qkv [1, 2, 8]");
  }
}

}  // namespace
}  // namespace kiln
