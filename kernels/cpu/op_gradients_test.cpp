// Every backward op of the CPU backend against central finite differences of its
// forward, in double precision: loss = sum(forward(x) * r) for a fixed random r, so the
// analytic gradient is backward(dout = r).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace kiln {
namespace {

class OpGradients : public testing::Test {
 protected:
  std::unique_ptr<Ops> ops = make_cpu_ops(2);
  std::mt19937_64 rng{42};

  Tensor make(std::vector<double>& storage, Shape shape, double scale = 1.0) {
    storage.resize(static_cast<size_t>(shape.numel()));
    std::normal_distribution<double> normal(0.0, scale);
    for (double& v : storage) v = normal(rng);
    return Tensor{storage.data(), DType::F64, shape, Device::Cpu};
  }

  static double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  }

  // Checks analytic[i] against the central difference of loss() in x[i], for every i.
  static void expect_gradient(std::vector<double>& x, const std::vector<double>& analytic,
                              const std::function<double()>& loss, const char* what) {
    const double h = 1e-5;
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double saved = x[i];
      x[i] = saved + h;
      const double up = loss();
      x[i] = saved - h;
      const double down = loss();
      x[i] = saved;
      const double numeric = (up - down) / (2 * h);
      const double error = std::abs(numeric - analytic[i]) / std::max(1.0, std::abs(numeric));
      worst = std::max(worst, error);
    }
    EXPECT_LT(worst, 1e-7) << what;
  }
};

TEST_F(OpGradients, Matmul) {
  std::vector<double> a, b, r, out(12 * 5);
  const Tensor ta = make(a, {12, 7}), tb = make(b, {5, 7}), tr = make(r, {12, 5});
  const Tensor tout{out.data(), DType::F64, {12, 5}, Device::Cpu};
  auto loss = [&] {
    ops->matmul(tout, ta, false, tb, true, false);
    return dot(out, r);
  };
  std::vector<double> da(a.size()), db(b.size(), 0.0);
  ops->matmul(Tensor{da.data(), DType::F64, {12, 7}, Device::Cpu}, tr, false, tb, false, false);
  ops->matmul(Tensor{db.data(), DType::F64, {5, 7}, Device::Cpu}, tr, true, ta, false, true);
  expect_gradient(a, da, loss, "dA");
  expect_gradient(b, db, loss, "dB");
}

TEST_F(OpGradients, LayerNorm) {
  const int64_t N = 6, C = 10;
  std::vector<double> x, w, bias, r, out(N * C), mean(N), rstd(N);
  const Tensor tx = make(x, {N, C}), tw = make(w, {C}), tb = make(bias, {C}), tr = make(r, {N, C});
  const Tensor tout{out.data(), DType::F64, {N, C}, Device::Cpu};
  const Tensor tmean{mean.data(), DType::F64, {N}, Device::Cpu};
  const Tensor trstd{rstd.data(), DType::F64, {N}, Device::Cpu};
  auto loss = [&] {
    ops->layernorm_forward(tout, tmean, trstd, tx, tw, tb, 1e-5);
    return dot(out, r);
  };
  loss();
  std::vector<double> dx(x.size(), 0.0), dw(C, 0.0), db(C, 0.0);
  ops->layernorm_backward(Tensor{dx.data(), DType::F64, {N, C}, Device::Cpu},
                          Tensor{dw.data(), DType::F64, {C}, Device::Cpu},
                          Tensor{db.data(), DType::F64, {C}, Device::Cpu}, tr, tx, tw, tmean, trstd);
  expect_gradient(x, dx, loss, "dx");
  expect_gradient(w, dw, loss, "dweight");
  expect_gradient(bias, db, loss, "dbias");
}

TEST_F(OpGradients, RmsNorm) {
  const int64_t N = 6, C = 10;
  std::vector<double> x, w, r, out(N * C), rstd(N);
  const Tensor tx = make(x, {N, C}), tw = make(w, {C}), tr = make(r, {N, C});
  const Tensor tout{out.data(), DType::F64, {N, C}, Device::Cpu};
  const Tensor trstd{rstd.data(), DType::F64, {N}, Device::Cpu};
  auto loss = [&] {
    ops->rmsnorm_forward(tout, trstd, tx, tw, 1e-5);
    return dot(out, r);
  };
  loss();
  std::vector<double> dx(x.size(), 0.0), dw(C, 0.0);
  ops->rmsnorm_backward(Tensor{dx.data(), DType::F64, {N, C}, Device::Cpu},
                        Tensor{dw.data(), DType::F64, {C}, Device::Cpu}, tr, tx, tw, trstd);
  expect_gradient(x, dx, loss, "dx");
  expect_gradient(w, dw, loss, "dweight");
}

// A split backward runs a norm's backward in two halves, the input gradient (weights empty)
// and then the weights' (dx empty): together they give what one call gives, bit for bit.
TEST_F(OpGradients, NormBackwardHalvesAddUpToTheWhole) {
  const int64_t N = 6, C = 10;
  std::vector<double> x, w, bias, r, out(N * C), mean(N), rstd(N);
  const Tensor tx = make(x, {N, C}), tw = make(w, {C}), tb = make(bias, {C}), tr = make(r, {N, C});
  const Tensor tout{out.data(), DType::F64, {N, C}, Device::Cpu};
  const Tensor tmean{mean.data(), DType::F64, {N}, Device::Cpu};
  const Tensor trstd{rstd.data(), DType::F64, {N}, Device::Cpu};
  const auto tensor = [](std::vector<double>& v, Shape shape) { return Tensor{v.data(), DType::F64, shape, Device::Cpu}; };
  for (const bool rms : {false, true}) {
    if (rms) ops->rmsnorm_forward(tout, trstd, tx, tw, 1e-5);
    else ops->layernorm_forward(tout, tmean, trstd, tx, tw, tb, 1e-5);
    const auto backward = [&](const Tensor& dx, const Tensor& dw, const Tensor& db) {
      if (rms) ops->rmsnorm_backward(dx, dw, tr, tx, tw, trstd);
      else ops->layernorm_backward(dx, dw, db, tr, tx, tw, tmean, trstd);
    };
    std::vector<double> dx(x.size(), 0.5), dw(C, 0.25), db(C, 0.125);
    std::vector<double> dx_half = dx, dw_half = dw, db_half = db;
    backward(tensor(dx, {N, C}), tensor(dw, {C}), tensor(db, {C}));
    backward(tensor(dx_half, {N, C}), Tensor{}, Tensor{});
    EXPECT_NE(dw_half, dw) << "the input gradient's half leaves the weights' alone";
    backward(Tensor{}, tensor(dw_half, {C}), tensor(db_half, {C}));
    EXPECT_EQ(dx_half, dx) << (rms ? "rmsnorm" : "layernorm");
    EXPECT_EQ(dw_half, dw) << (rms ? "rmsnorm" : "layernorm");
    if (!rms) {
      EXPECT_EQ(db_half, db);
    }
  }
}

TEST_F(OpGradients, GeluAndSwiglu) {
  std::vector<double> x, r, out(40);
  const Tensor tx = make(x, {4, 10}, 2.0), tr = make(r, {4, 10});
  const Tensor tout{out.data(), DType::F64, {4, 10}, Device::Cpu};
  auto gelu = [&] {
    ops->gelu_forward(tout, tx);
    return dot(out, r);
  };
  std::vector<double> dx(x.size());
  ops->gelu_backward(Tensor{dx.data(), DType::F64, {4, 10}, Device::Cpu}, tx, tr);
  expect_gradient(x, dx, gelu, "gelu dx");

  std::vector<double> gu, r2, out2(4 * 5);
  const Tensor tgu = make(gu, {4, 10}, 2.0), tr2 = make(r2, {4, 5});
  const Tensor tout2{out2.data(), DType::F64, {4, 5}, Device::Cpu};
  auto swiglu = [&] {
    ops->swiglu_forward(tout2, tgu);
    return dot(out2, r2);
  };
  std::vector<double> dgu(gu.size());
  ops->swiglu_backward(Tensor{dgu.data(), DType::F64, {4, 10}, Device::Cpu}, tgu, tr2);
  expect_gradient(gu, dgu, swiglu, "swiglu dx");
}

TEST_F(OpGradients, EmbeddingAndBias) {
  const int64_t B = 2, T = 5, C = 4, V = 7;
  // Ids -2 and 9 are outside the table (another vocabulary-parallel rank's): a zero row, no
  // gradient.
  std::vector<int32_t> tokens = {1, 3, 3, 6, 0, 2, -2, 2, 9, 1};
  const Tensor ttok{tokens.data(), DType::I32, {B, T}, Device::Cpu};
  std::vector<double> wte, wpe, r, out(B * T * C);
  const Tensor twte = make(wte, {V, C}), twpe = make(wpe, {T, C}), tr = make(r, {B, T, C});
  const Tensor tout{out.data(), DType::F64, {B, T, C}, Device::Cpu};
  auto loss = [&] {
    ops->embedding_forward(tout, ttok, twte, twpe, Tensor{});
    return dot(out, r);
  };
  std::vector<double> dwte(wte.size(), 0.0), dwpe(wpe.size(), 0.0);
  ops->embedding_backward(Tensor{dwte.data(), DType::F64, {V, C}, Device::Cpu},
                          Tensor{dwpe.data(), DType::F64, {T, C}, Device::Cpu}, ttok, tr,
                          Tensor{});
  expect_gradient(wte, dwte, loss, "dwte");
  expect_gradient(wpe, dwpe, loss, "dwpe");

  // Per-token positions (documents restarting at 0, one position never used): each token
  // reads, and adds its gradient into, its own position's row.
  std::vector<int32_t> positions = {0, 1, 2, 0, 1, 0, 0, 1, 2, 3};
  const Tensor tpos{positions.data(), DType::I32, {B, T}, Device::Cpu};
  auto loss_at_positions = [&] {
    ops->embedding_forward(tout, ttok, twte, twpe, tpos);
    return dot(out, r);
  };
  loss_at_positions();
  for (int64_t n = 0; n < B * T; ++n) {
    const bool inside = tokens[n] >= 0 && tokens[n] < V;
    EXPECT_EQ(out[n * C], (inside ? wte[tokens[n] * C] : 0.0) + wpe[positions[n] * C])
        << "token " << n;
  }
  std::fill(dwte.begin(), dwte.end(), 0.0);
  std::fill(dwpe.begin(), dwpe.end(), 0.0);
  ops->embedding_backward(Tensor{dwte.data(), DType::F64, {V, C}, Device::Cpu},
                          Tensor{dwpe.data(), DType::F64, {T, C}, Device::Cpu}, ttok, tr, tpos);
  expect_gradient(wte, dwte, loss_at_positions, "dwte with positions");
  expect_gradient(wpe, dwpe, loss_at_positions, "dwpe with positions");
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dwpe[4 * C + c], 0.0) << "position 4 is unused";

  std::vector<double> x, bias, r2, y(6 * 3);
  make(x, {6, 3});
  const Tensor tbias = make(bias, {3}), tr2 = make(r2, {6, 3});
  const Tensor ty{y.data(), DType::F64, {6, 3}, Device::Cpu};
  auto bias_loss = [&] {
    y = x;
    ops->add_bias(ty, tbias);
    return dot(y, r2);
  };
  std::vector<double> dbias(3, 0.0);
  ops->bias_backward(Tensor{dbias.data(), DType::F64, {3}, Device::Cpu}, tr2);
  expect_gradient(bias, dbias, bias_loss, "dbias");
}

// Attention with RoPE in front, grouped-query heads (4 query heads share 2 kv heads), at a
// sequence shorter than one block of query rows and at one spanning two blocks; plain, and
// with the resets of packed documents (RoPE positions restart at 0 and each token attends
// within its document only).
class AttentionGradients : public OpGradients, public testing::WithParamInterface<int64_t> {
 protected:
  void check(const Tensor& positions, const Tensor& key_starts) {
    const int64_t B = 2, T = GetParam();
    const AttentionShape s{4, 2, 4};
    const int64_t W = s.qkv_width(), O = s.n_head * s.head_dim;
    std::vector<double> qkv, r, work(B * T * W), out(B * T * O), lse(B * s.n_head * T);
    make(qkv, {B, T, W});
    const Tensor tr = make(r, {B, T, O});
    const Tensor twork{work.data(), DType::F64, {B, T, W}, Device::Cpu};
    const Tensor tout{out.data(), DType::F64, {B, T, O}, Device::Cpu};
    const Tensor tlse{lse.data(), DType::F64, {B * s.n_head * T}, Device::Cpu};
    std::vector<double> table(T * 2 * 2);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < 2; ++i) {
        const double angle = static_cast<double>(t) * std::pow(10000.0, -2.0 * i / 4.0);
        table[(t * 2 + i) * 2] = std::cos(angle);
        table[(t * 2 + i) * 2 + 1] = std::sin(angle);
      }
    const Tensor ttable{table.data(), DType::F64, {T, 2, 2}, Device::Cpu};
    ops->reserve({B, T, s});
    auto loss = [&] {
      work = qkv;
      ops->rope_forward(twork, ttable, s, positions);
      ops->attention_forward(tout, tlse, twork, s, key_starts);
      return dot(out, r);
    };
    loss();
    std::vector<double> dqkv(qkv.size());
    const Tensor tdqkv{dqkv.data(), DType::F64, {B, T, W}, Device::Cpu};
    ops->attention_backward(tdqkv, tr, twork, tout, tlse, s, key_starts);
    ops->rope_backward(tdqkv, ttable, s, positions);
    expect_gradient(qkv, dqkv, loss, "dqkv");
  }
};

TEST_P(AttentionGradients, RopeAndAttention) { check(Tensor{}, Tensor{}); }

TEST_P(AttentionGradients, RopeAndAttentionWithDocumentResets) {
  const int64_t B = 2, T = GetParam();
  // Documents end where (5t + 3b) % 11 == 2: lengths from 1 up, a different cut per row.
  std::vector<int32_t> positions(B * T), starts(B * T);
  for (int64_t b = 0; b < B; ++b) {
    int32_t start = 0;
    for (int64_t t = 0; t < T; ++t) {
      starts[b * T + t] = start;
      positions[b * T + t] = static_cast<int32_t>(t) - start;
      if ((5 * t + 3 * b) % 11 == 2) start = static_cast<int32_t>(t) + 1;
    }
  }
  check(Tensor{positions.data(), DType::I32, {B, T}, Device::Cpu},
        Tensor{starts.data(), DType::I32, {B, T}, Device::Cpu});
}

INSTANTIATE_TEST_SUITE_P(Seq, AttentionGradients, testing::Values(6, 40));

TEST_F(OpGradients, CrossEntropyWithPaddingAndMask) {
  const int64_t N = 5, Vp = 8, V = 6;
  std::vector<double> logits, losses(N), lse(N);
  const Tensor tl = make(logits, {N, Vp}, 2.0);
  // Target 9 is past the real columns (another vocabulary-parallel rank's): its loss is the
  // lse alone and its gradient the softmax alone.
  std::vector<int32_t> targets = {0, 5, -1, 3, 9};
  const Tensor tt{targets.data(), DType::I32, {N}, Device::Cpu};
  const Tensor tloss{losses.data(), DType::F64, {N}, Device::Cpu};
  const Tensor tlse{lse.data(), DType::F64, {N}, Device::Cpu};
  auto loss = [&] {
    ops->cross_entropy_forward(tloss, tlse, tl, tt, V);
    double s = 0;
    for (double v : losses) s += v;
    return 0.5 * s;
  };
  loss();
  EXPECT_EQ(losses[2], 0.0);
  EXPECT_EQ(losses[4], lse[4]);
  std::vector<double> dlogits(logits.size());
  ops->cross_entropy_backward(Tensor{dlogits.data(), DType::F64, {N, Vp}, Device::Cpu}, tl, tlse,
                              tt, V, 0.5);
  expect_gradient(logits, dlogits, loss, "dlogits");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = V; v < Vp; ++v) EXPECT_EQ(dlogits[n * Vp + v], 0.0);
}

}  // namespace
}  // namespace kiln
