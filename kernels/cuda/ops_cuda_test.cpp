// Every CUDA op against its CPU twin on random inputs (never zeros), with the CUDA output
// poisoned with NaN before the run, in fp32, bf16 and fp16. Both sides see the same input
// values (rounded to the GPU dtype first); the tolerance is on the relative error of the
// whole output, ||gpu - cpu|| / ||cpu||: 1e-5 in fp32, 1e-2 in bf16, 5e-3 in fp16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "trainer/memory/host_copy.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

struct Pair {
  Tensor cpu;  // F32 (statistics and gradients too)
  Tensor gpu;  // the dtype under test, or F32 for statistics and gradients
};

class CudaOps : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    // Kiln's attention kernels; cuDNN's have cudnn_attention_cuda_test.cpp.
    gpu_ = make_cuda_ops(0, AttentionChoice::Kiln);
  }
  void TearDown() override {
    for (void* p : cpu_memory_) cpu_->release(p);
    for (void* p : gpu_memory_) gpu_->release(p);
  }

  DType dtype() const { return GetParam(); }
  double tolerance() const {
    switch (dtype()) {
      case DType::BF16: return 1e-2;
      case DType::F16: return 5e-3;
      default: return 1e-5;
    }
  }

  Tensor alloc(Ops& ops, std::vector<void*>& owned, Shape shape, DType type) {
    Tensor t{nullptr, type, shape, ops.device()};
    t.data = ops.allocate(t.bytes());
    owned.push_back(t.data);
    return t;
  }

  // Random values of the given scale, none zero, identical on both sides.
  Pair random(Shape shape, DType gpu_type, double scale = 1.0) {
    Pair p{alloc(*cpu_, cpu_memory_, shape, DType::F32), alloc(*gpu_, gpu_memory_, shape, gpu_type)};
    std::vector<double> values(static_cast<size_t>(shape.numel()));
    for (double& v : values) {
      v = scale * rng_.normal();
      if (std::abs(v) < 1e-3 * scale) v = 1e-3 * scale;
    }
    copy_from_doubles(*gpu_, p.gpu, values);
    copy_from_doubles(*cpu_, p.cpu, copy_to_doubles(*gpu_, p.gpu));  // the rounded values
    return p;
  }
  // An output: zero on the CPU, NaN on the GPU so that anything left unwritten shows.
  Pair output(Shape shape, DType gpu_type) {
    Pair p{alloc(*cpu_, cpu_memory_, shape, DType::F32), alloc(*gpu_, gpu_memory_, shape, gpu_type)};
    cpu_->fill(p.cpu, 0.0);
    gpu_->fill(p.gpu, std::numeric_limits<double>::quiet_NaN());
    return p;
  }
  // An accumulator (+=): the same random start on both sides.
  Pair accumulator(Shape shape, DType gpu_type) { return random(shape, gpu_type, 0.1); }
  Pair ids(Shape shape, int64_t below, bool with_masked = false) {
    std::vector<int32_t> values(static_cast<size_t>(shape.numel()));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = with_masked && i % 7 == 3 ? -1 : static_cast<int32_t>(rng_.below(below));
    return integers(shape, values);
  }
  Pair integers(Shape shape, const std::vector<int32_t>& values) {
    Pair p{alloc(*cpu_, cpu_memory_, shape, DType::I32), alloc(*gpu_, gpu_memory_, shape, DType::I32)};
    cpu_->copy_from_host(p.cpu, values.data());
    gpu_->copy_from_host(p.gpu, values.data());
    return p;
  }
  // Megatron's resets for [batch, seq] rows that pack documents ending at the given columns
  // of each row: positions restart at 0 and key starts move to each document's first token.
  std::pair<Pair, Pair> document_resets(int64_t batch, int64_t seq,
                                        const std::vector<std::vector<int32_t>>& ends) {
    std::vector<int32_t> positions, starts;
    for (int64_t b = 0; b < batch; ++b) {
      int32_t start = 0;
      for (int32_t t = 0; t < seq; ++t) {
        positions.push_back(t - start);
        starts.push_back(start);
        for (int32_t end : ends[static_cast<size_t>(b)])
          if (t == end) start = t + 1;
      }
    }
    return {integers({batch, seq}, positions), integers({batch, seq}, starts)};
  }

  void expect_close(const Pair& p, const std::string& what, double tol = 0) {
    const std::vector<double> want = copy_to_doubles(*cpu_, p.cpu);
    const std::vector<double> got = copy_to_doubles(*gpu_, p.gpu);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << what << "[" << i << "] was not written";
      diff += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
    EXPECT_LE(std::sqrt(diff / std::max(norm, 1e-30)), tol > 0 ? tol : tolerance()) << what;
  }

  void rope_and_attention(int64_t seq, const Pair& positions, const Pair& key_starts);
  void linear_products(int64_t width, int64_t in);

  std::unique_ptr<Ops> cpu_ = make_cpu_ops(2);
  std::unique_ptr<Ops> gpu_;
  std::vector<void*> cpu_memory_, gpu_memory_;
  Random rng_{2024};
};

constexpr int64_t B = 2, T = 70, C = 96;  // T and C not multiples of the usual tile sizes

TEST_P(CudaOps, Matmul) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Pair a = random(ta ? Shape{40, 130} : Shape{130, 40}, dtype());
      const Pair b = random(tb ? Shape{72, 40} : Shape{40, 72}, dtype());
      const Pair out = output({130, 72}, dtype());
      cpu_->matmul(out.cpu, a.cpu, ta, b.cpu, tb, false);
      gpu_->matmul(out.gpu, a.gpu, ta, b.gpu, tb, false);
      expect_close(out, "matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    }
  }
  // A weight gradient: float accumulator from low-precision inputs.
  const Pair dy = random({130, 72}, dtype()), x = random({130, 40}, dtype());
  const Pair dw = accumulator({72, 40}, DType::F32);
  cpu_->matmul(dw.cpu, dy.cpu, true, x.cpu, false, true);
  gpu_->matmul(dw.gpu, dy.gpu, true, x.gpu, false, true);
  expect_close(dw, "matmul weight gradient");
}

TEST_P(CudaOps, ElementwiseAndBias) {
  const Pair a = random({B, T, C}, dtype()), b = random({B, T, C}, dtype());
  const Pair sum = output({B, T, C}, dtype());
  cpu_->add(sum.cpu, a.cpu, b.cpu);
  gpu_->add(sum.gpu, a.gpu, b.gpu);
  expect_close(sum, "add");

  const Pair bias = random({C}, dtype());
  cpu_->add_bias(a.cpu, bias.cpu);
  gpu_->add_bias(a.gpu, bias.gpu);
  expect_close(a, "add_bias");

  // A LoRA adapter's part of a fused output: columns [16, 16 + 24) of a [B T, C] matrix.
  const Pair part = random({B * T, 24}, dtype()), taken = output({B * T, 24}, dtype());
  const Pair whole = random({B * T, C}, dtype());
  cpu_->add_columns(whole.cpu, part.cpu, 16, 0.75);
  gpu_->add_columns(whole.gpu, part.gpu, 16, 0.75);
  expect_close(whole, "add_columns");
  cpu_->take_columns(taken.cpu, whole.cpu, 16, -2.0);
  gpu_->take_columns(taken.gpu, whole.gpu, 16, -2.0);
  expect_close(taken, "take_columns");
  // Latent attention's head blocks: 4 heads of 10 into blocks of 6 (at 2 of each 8-wide head),
  // one block into every head, and the heads summed into one.
  const Pair heads = random({B * T, 40}, dtype()), blocks = output({B * T, 32}, dtype());
  const Pair one = output({B * T, 6}, dtype());
  cpu_->copy_head_columns(blocks.cpu, heads.cpu, {4, 6, 2, 8, 3, 10});
  gpu_->copy_head_columns(blocks.gpu, heads.gpu, {4, 6, 2, 8, 3, 10});
  expect_close(blocks, "copy_head_columns");
  cpu_->copy_head_columns(one.cpu, heads.cpu, {4, 6, 0, 0, 3, 10});
  gpu_->copy_head_columns(one.gpu, heads.gpu, {4, 6, 0, 0, 3, 10});
  expect_close(one, "copy_head_columns summing the heads");
  cpu_->copy_head_columns(blocks.cpu, one.cpu, {4, 6, 1, 8, 0, 0});
  gpu_->copy_head_columns(blocks.gpu, one.gpu, {4, 6, 1, 8, 0, 0});
  expect_close(blocks, "copy_head_columns into every head");

  const Pair dbias = accumulator({C}, DType::F32);
  cpu_->bias_backward(dbias.cpu, b.cpu);
  gpu_->bias_backward(dbias.gpu, b.gpu);
  expect_close(dbias, "bias_backward");

  const Pair g = random({100003}, DType::F32);
  // Summed into one value twice: the second adds to the first.
  const Pair squares{alloc(*cpu_, cpu_memory_, {1}, DType::F64), alloc(*gpu_, gpu_memory_, {1}, DType::F64)};
  for (int i = 0; i < 2; ++i) {
    cpu_->sum_squares(squares.cpu, g.cpu);
    gpu_->sum_squares(squares.gpu, g.gpu);
  }
  EXPECT_NEAR(copy_to_doubles(*gpu_, squares.gpu)[0] / copy_to_doubles(*cpu_, squares.cpu)[0], 1.0, 1e-6);
  cpu_->scale(g.cpu, 0.37);
  gpu_->scale(g.gpu, 0.37);
  expect_close(g, "scale", 1e-6);

  const Pair converted = output({B, T, C}, DType::F32);
  cpu_->cast(converted.cpu, b.cpu);
  gpu_->cast(converted.gpu, b.gpu);
  expect_close(converted, "cast", 1e-7);
}

// A linear layer's fused products (ops.h: matmul_bias and the rest) against the CPU's separate
// ops, x [B*T, in] to [B*T, width]. Outputs past a GELU get 1e-3 in fp32: cuBLASLt may take
// GELU's tanh from the hardware's approximation (tanh.approx.f32, relative error below
// 2^-10.9); bf16 and fp16 rounding is coarser than that, and they keep their tolerance.
void CudaOps::linear_products(int64_t width, int64_t in) {
  const int64_t rows = B * T;
  const double gelu_tol = dtype() == DType::F32 ? 1e-3 : tolerance();
  const std::string at = " (" + std::to_string(width) + " from " + std::to_string(in) + ")";
  const Pair x = random({rows, in}, dtype()), w = random({width, in}, dtype(), 0.2);
  const Pair bias = random({width}, dtype());

  const Pair y = output({rows, width}, dtype());
  cpu_->matmul_bias(y.cpu, x.cpu, w.cpu, bias.cpu);
  gpu_->matmul_bias(y.gpu, x.gpu, w.gpu, bias.gpu);
  expect_close(y, "matmul_bias" + at);

  const Pair hidden = output({rows, width}, dtype()), pre = output({rows, width}, dtype());
  cpu_->matmul_bias_gelu(hidden.cpu, pre.cpu, x.cpu, w.cpu, bias.cpu);
  gpu_->matmul_bias_gelu(hidden.gpu, pre.gpu, x.gpu, w.gpu, bias.gpu);
  expect_close(pre, "matmul_bias_gelu's pre-activation" + at);
  expect_close(hidden, "matmul_bias_gelu" + at, gelu_tol);

  // Gradients accumulate into float buffers that already hold a micro-batch's.
  const Pair dy = random({rows, width}, dtype());
  const Pair dw = accumulator({width, in}, DType::F32), db = accumulator({width}, DType::F32);
  cpu_->matmul_bias_grad(dw.cpu, db.cpu, dy.cpu, x.cpu);
  gpu_->matmul_bias_grad(dw.gpu, db.gpu, dy.gpu, x.gpu);
  expect_close(dw, "matmul_bias_grad's weight gradient" + at);
  expect_close(db, "matmul_bias_grad's bias gradient" + at);

  const Pair gelu_in = random({rows, in}, dtype()), dx = output({rows, in}, dtype());
  cpu_->matmul_dgelu(dx.cpu, dy.cpu, w.cpu, gelu_in.cpu);
  gpu_->matmul_dgelu(dx.gpu, dy.gpu, w.gpu, gelu_in.gpu);
  expect_close(dx, "matmul_dgelu" + at, gelu_tol);
}

TEST_P(CudaOps, FusedLinearProducts) {
  // Widths that are multiples of 8: cuBLASLt's epilogues where it has them for the dtype
  // (which it has is the benchmark's to show, bench/gpu-queue.md; the log says here).
  linear_products(72, 40);
  std::printf("fused products, %s: %s\n", dtype_name(dtype()),
              gpu_->product_tuning().empty() ? "every one fused" : gpu_->product_tuning().c_str());
  // A GELU matrix whose rows are not a multiple of 8 elements is no epilogue's: the
  // separate ops run, with the same results, and the banner's line says so.
  linear_products(70, 38);
  EXPECT_NE(gpu_->product_tuning().find("without a fused cuBLASLt kernel"), std::string::npos)
      << gpu_->product_tuning();
}

// Tuning times each new product's candidates on its own buffers: products that accumulate
// (weight gradients) must still add their product once, and every result stays the CPU's.
TEST_P(CudaOps, TunedProductsKeepTheirResults) {
  gpu_->tune_products(true);
  const Pair dy = random({130, 72}, dtype()), x = random({130, 40}, dtype());
  const Pair dw = accumulator({72, 40}, DType::F32);
  cpu_->matmul(dw.cpu, dy.cpu, true, x.cpu, false, true);
  gpu_->matmul(dw.gpu, dy.gpu, true, x.gpu, false, true);
  expect_close(dw, "tuned weight gradient");
  linear_products(72, 40);
  gpu_->tune_products(false);
  const std::string tuning = gpu_->product_tuning();
  EXPECT_NE(tuning.find(" tuned in "), std::string::npos) << tuning;
  // Again, from the plans tuning chose.
  linear_products(72, 40);
}

TEST_P(CudaOps, Embedding) {
  const int64_t V = 50;
  const Pair tokens = ids({B, T}, V);
  const Pair wte = random({V, C}, dtype()), wpe = random({T, C}, dtype());
  const Pair out = output({B, T, C}, dtype());
  cpu_->embedding_forward(out.cpu, tokens.cpu, wte.cpu, wpe.cpu, Tensor{});
  gpu_->embedding_forward(out.gpu, tokens.gpu, wte.gpu, wpe.gpu, Tensor{});
  expect_close(out, "embedding_forward");

  const Pair dout = random({B, T, C}, dtype());
  const Pair dwte = accumulator({V, C}, DType::F32), dwpe = accumulator({T, C}, DType::F32);
  cpu_->embedding_backward(dwte.cpu, dwpe.cpu, tokens.cpu, dout.cpu, Tensor{});
  gpu_->embedding_backward(dwte.gpu, dwpe.gpu, tokens.gpu, dout.gpu, Tensor{});
  expect_close(dwte, "embedding_backward dwte");
  expect_close(dwpe, "embedding_backward dwpe");

  // Per-token positions of packed documents: dwpe takes the sorted path of dwte.
  const Pair positions = document_resets(B, T, {{0, 30, 31}, {68}}).first;
  const Pair out_at = output({B, T, C}, dtype());
  cpu_->embedding_forward(out_at.cpu, tokens.cpu, wte.cpu, wpe.cpu, positions.cpu);
  gpu_->embedding_forward(out_at.gpu, tokens.gpu, wte.gpu, wpe.gpu, positions.gpu);
  expect_close(out_at, "embedding_forward with positions");
  cpu_->embedding_backward(dwte.cpu, dwpe.cpu, tokens.cpu, dout.cpu, positions.cpu);
  gpu_->embedding_backward(dwte.gpu, dwpe.gpu, tokens.gpu, dout.gpu, positions.gpu);
  expect_close(dwte, "embedding_backward dwte with positions");
  expect_close(dwpe, "embedding_backward dwpe with positions");

  // Ids past the table (a vocabulary-parallel rank's view of the others' tokens).
  const Pair foreign = ids({B, T}, V + 20);
  cpu_->embedding_forward(out.cpu, foreign.cpu, wte.cpu, wpe.cpu, Tensor{});
  gpu_->embedding_forward(out.gpu, foreign.gpu, wte.gpu, wpe.gpu, Tensor{});
  expect_close(out, "embedding_forward with foreign ids");
  cpu_->embedding_backward(dwte.cpu, dwpe.cpu, foreign.cpu, dout.cpu, Tensor{});
  gpu_->embedding_backward(dwte.gpu, dwpe.gpu, foreign.gpu, dout.gpu, Tensor{});
  expect_close(dwte, "embedding_backward dwte with foreign ids");
}

TEST_P(CudaOps, Norms) {
  const Pair x = random({B * T, C}, dtype()), w = random({C}, dtype()), bias = random({C}, dtype());
  const Pair out = output({B * T, C}, dtype());
  const Pair mean = output({B * T}, DType::F32), rstd = output({B * T}, DType::F32);
  cpu_->layernorm_forward(out.cpu, mean.cpu, rstd.cpu, x.cpu, w.cpu, bias.cpu, 1e-5);
  gpu_->layernorm_forward(out.gpu, mean.gpu, rstd.gpu, x.gpu, w.gpu, bias.gpu, 1e-5);
  expect_close(out, "layernorm_forward");
  expect_close(rstd, "layernorm rstd", 1e-5);

  const Pair dout = random({B * T, C}, dtype());
  const Pair dx = accumulator({B * T, C}, dtype());
  const Pair dw = accumulator({C}, DType::F32), db = accumulator({C}, DType::F32);
  cpu_->layernorm_backward(dx.cpu, dw.cpu, db.cpu, dout.cpu, x.cpu, w.cpu, mean.cpu, rstd.cpu);
  gpu_->layernorm_backward(dx.gpu, dw.gpu, db.gpu, dout.gpu, x.gpu, w.gpu, mean.gpu, rstd.gpu);
  expect_close(dx, "layernorm_backward dx");
  expect_close(dw, "layernorm_backward dweight");
  expect_close(db, "layernorm_backward dbias");

  const Pair rms_out = output({B * T, C}, dtype());
  cpu_->rmsnorm_forward(rms_out.cpu, rstd.cpu, x.cpu, w.cpu, 1e-5);
  gpu_->rmsnorm_forward(rms_out.gpu, rstd.gpu, x.gpu, w.gpu, 1e-5);
  expect_close(rms_out, "rmsnorm_forward");
  cpu_->rmsnorm_backward(dx.cpu, dw.cpu, dout.cpu, x.cpu, w.cpu, rstd.cpu);
  gpu_->rmsnorm_backward(dx.gpu, dw.gpu, dout.gpu, x.gpu, w.gpu, rstd.gpu);
  expect_close(dx, "rmsnorm_backward dx");
  expect_close(dw, "rmsnorm_backward dweight");
  // A frozen norm (LoRA's base) has no weight gradients: dx alone.
  cpu_->rmsnorm_backward(dx.cpu, Tensor{nullptr, DType::F32, {C}}, dout.cpu, x.cpu, w.cpu, rstd.cpu);
  gpu_->rmsnorm_backward(dx.gpu, Tensor{nullptr, DType::F32, {C}, Device::Cuda}, dout.gpu, x.gpu, w.gpu, rstd.gpu);
  expect_close(dx, "rmsnorm_backward dx of a frozen norm");
  const Tensor none{nullptr, DType::F32, {C}, Device::Cuda};
  cpu_->layernorm_backward(dx.cpu, Tensor{nullptr, DType::F32, {C}}, Tensor{nullptr, DType::F32, {C}}, dout.cpu,
                           x.cpu, w.cpu, mean.cpu, rstd.cpu);
  gpu_->layernorm_backward(dx.gpu, none, none, dout.gpu, x.gpu, w.gpu, mean.gpu, rstd.gpu);
  expect_close(dx, "layernorm_backward dx of a frozen norm");
  // A split backward's weight pass: the weights' gradients alone.
  cpu_->layernorm_backward(Tensor{}, dw.cpu, db.cpu, dout.cpu, x.cpu, w.cpu, mean.cpu, rstd.cpu);
  gpu_->layernorm_backward(Tensor{}, dw.gpu, db.gpu, dout.gpu, x.gpu, w.gpu, mean.gpu, rstd.gpu);
  expect_close(dw, "layernorm_backward dweight alone");
  expect_close(db, "layernorm_backward dbias alone");
  cpu_->rmsnorm_backward(Tensor{}, dw.cpu, dout.cpu, x.cpu, w.cpu, rstd.cpu);
  gpu_->rmsnorm_backward(Tensor{}, dw.gpu, dout.gpu, x.gpu, w.gpu, rstd.gpu);
  expect_close(dw, "rmsnorm_backward dweight alone");
}

TEST_P(CudaOps, Activations) {
  const int64_t F = 136;
  const Pair x = random({B * T, F}, dtype(), 2.0), dout = random({B * T, F}, dtype());
  const Pair y = output({B * T, F}, dtype()), dx = output({B * T, F}, dtype());
  cpu_->gelu_forward(y.cpu, x.cpu);
  gpu_->gelu_forward(y.gpu, x.gpu);
  expect_close(y, "gelu_forward");
  cpu_->gelu_backward(dx.cpu, x.cpu, dout.cpu);
  gpu_->gelu_backward(dx.gpu, x.gpu, dout.gpu);
  expect_close(dx, "gelu_backward");

  const Pair gate_up = random({B * T, 2 * F}, dtype(), 2.0);
  const Pair h = output({B * T, F}, dtype()), dgu = output({B * T, 2 * F}, dtype());
  cpu_->swiglu_forward(h.cpu, gate_up.cpu);
  gpu_->swiglu_forward(h.gpu, gate_up.gpu);
  expect_close(h, "swiglu_forward");
  cpu_->swiglu_backward(dgu.cpu, gate_up.cpu, dout.cpu);
  gpu_->swiglu_backward(dgu.gpu, gate_up.gpu, dout.gpu);
  expect_close(dgu, "swiglu_backward");
}

TEST_P(CudaOps, ExpertRowMoves) {
  // 2 choices per token; some indices name no row (dropped, or a padding row).
  const int64_t N = B * T, k = 2, M = N * k + 5;
  const Pair x = random({N, C}, dtype()), y = random({M, C}, dtype());
  const Pair src = ids({M}, N, true), pos = ids({N, k}, M, true);
  const Pair row_w = random({M}, DType::F32), pair_w = random({N, k}, DType::F32);
  const Pair gathered = output({M, C}, dtype());
  cpu_->gather_rows(gathered.cpu, x.cpu, src.cpu, row_w.cpu);
  gpu_->gather_rows(gathered.gpu, x.gpu, src.gpu, row_w.gpu);
  expect_close(gathered, "gather_rows");
  const Pair combined = output({N, C}, dtype());
  cpu_->combine_rows(combined.cpu, y.cpu, pos.cpu, pair_w.cpu, false);
  gpu_->combine_rows(combined.gpu, y.gpu, pos.gpu, pair_w.gpu, false);
  expect_close(combined, "combine_rows");
  const Pair summed = accumulator({N, C}, dtype());
  cpu_->combine_rows(summed.cpu, y.cpu, pos.cpu, Tensor{}, true);
  gpu_->combine_rows(summed.gpu, y.gpu, pos.gpu, Tensor{}, true);
  expect_close(summed, "combine_rows accumulating");
  const Pair dots = output({N, k}, DType::F32);
  cpu_->row_dots(dots.cpu, x.cpu, y.cpu, pos.cpu);
  gpu_->row_dots(dots.gpu, x.gpu, y.gpu, pos.gpu);
  expect_close(dots, "row_dots");
}

TEST_P(CudaOps, ExpertProducts) {
  // Four experts of uneven rows, the third without any (the grouped GEMM's products skip it).
  const std::vector<int64_t> offsets = {0, 37, 120, 120, 141};
  const int64_t R = offsets.back(), E = 4, W = 72, D = 40;
  const Pair x = random({R, D}, dtype()), hidden = random({R, W}, dtype());
  const Pair w = random({E * W, D}, dtype());
  const Pair forward = output({R, W}, dtype());
  cpu_->expert_matmul(forward.cpu, x.cpu, w.cpu, true, offsets);
  gpu_->expert_matmul(forward.gpu, x.gpu, w.gpu, true, offsets);
  expect_close(forward, "expert_matmul x w^T");
  const Pair input_grad = output({R, D}, dtype());
  cpu_->expert_matmul(input_grad.cpu, hidden.cpu, w.cpu, false, offsets);
  gpu_->expert_matmul(input_grad.gpu, hidden.gpu, w.gpu, false, offsets);
  expect_close(input_grad, "expert_matmul dy w");
  // Into float gradients (16-bit inputs go expert by expert) and into gradients of the inputs'
  // type (one grouped call).
  for (const DType grad_type : {DType::F32, dtype()}) {
    const Pair dw = accumulator({E * W, D}, grad_type);
    cpu_->expert_weight_grad(dw.cpu, hidden.cpu, x.cpu, offsets);
    gpu_->expert_weight_grad(dw.gpu, hidden.gpu, x.gpu, offsets);
    expect_close(dw, std::string("expert_weight_grad into ") + dtype_name(grad_type));
  }
}

// The router on both sides, from the same logits (as the GPU rounded them) and selection bias.
// Each token's logits are a shuffle of values 0.5 apart plus a little noise, so that no two of
// its experts (nor groups) score close enough for float and double to order them apart:
// choices and rows must agree exactly, gates and statistics to float's rounding, the logits'
// gradient to the dtype's tolerance.
TEST_P(CudaOps, ExpertRouting) {
  const int64_t N = B * T, E = 16;
  std::vector<double> values;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<int> order(E);
    for (int e = 0; e < E; ++e) order[e] = e;
    for (int e = E - 1; e > 0; --e) std::swap(order[e], order[rng_.below(e + 1)]);
    for (int e = 0; e < E; ++e) values.push_back(0.5 * order[e] - 4 + 0.3 * rng_.uniform());
  }
  const Pair logits = random({N, E}, dtype());
  copy_from_doubles(*gpu_, logits.gpu, values);
  copy_from_doubles(*cpu_, logits.cpu, copy_to_doubles(*gpu_, logits.gpu));
  const Pair bias = random({E}, DType::F32, 0.05);
  const auto same_integers = [&](const Pair& p, const std::string& what) {
    std::vector<int32_t> want(static_cast<size_t>(p.cpu.numel())), got(want.size());
    cpu_->copy_to_host(want.data(), p.cpu);
    gpu_->copy_to_host(got.data(), p.gpu);
    EXPECT_EQ(got, want) << what;
  };
  const auto unset = [&](Shape shape) {
    return integers(shape, std::vector<int32_t>(static_cast<size_t>(shape.numel()), -7));
  };

  const auto with = [&](int64_t k, auto edit) {
    ExpertRoute r;
    r.experts = E;
    r.top_k = k;
    r.normalize = true;
    edit(r);
    return r;
  };
  const int64_t capacity = (N * 2 / E + 1) / 2;  // half an even share: most experts drop
  const std::vector<std::pair<std::string, ExpertRoute>> cases = {
      {"softmax top-2", with(2, [](ExpertRoute&) {})},
      {"sigmoid top-4 of 2 groups of 4, scaled", with(4, [](ExpertRoute& r) {
         r.sigmoid = true;
         r.groups = 4;
         r.groups_topk = 2;
         r.gate_scale = 2.5;
       })},
      {"over capacity, by gate", with(2, [&](ExpertRoute& r) { r.capacity = capacity; })},
      {"over capacity, by position, padded", with(2, [&](ExpertRoute& r) {
         r.capacity = capacity;
         r.drop_by_gate = false;
         r.pad = true;
         r.normalize = false;
       })},
  };
  for (const auto& [name, route] : cases) {
    SCOPED_TRACE(name);
    const int64_t k = route.top_k, M = route.most_rows(N);
    const Pair choice = unset({N, k}), gate = output({N, k}, DType::F32), stats = output({E + 2}, DType::F32);
    cpu_->route_tokens(choice.cpu, gate.cpu, stats.cpu, logits.cpu, bias.cpu, route);
    gpu_->route_tokens(choice.gpu, gate.gpu, stats.gpu, logits.gpu, bias.gpu, route);
    same_integers(choice, "route_tokens' choices");
    expect_close(gate, "route_tokens' gates", 1e-5);
    expect_close(stats, "route_tokens' statistics", 1e-5);

    // The rows of the GPU's choices and gates, on both sides.
    copy_from_doubles(*cpu_, gate.cpu, copy_to_doubles(*gpu_, gate.gpu));
    const Pair row = unset({N, k}), source = unset({M}), offsets = unset({E + 1});
    const Pair row_gate = accumulator({M}, DType::F32), counts = output({2 * E}, DType::F32);
    cpu_->route_rows(row.cpu, source.cpu, row_gate.cpu, offsets.cpu, counts.cpu, choice.cpu, gate.cpu, route);
    gpu_->route_rows(row.gpu, source.gpu, row_gate.gpu, offsets.gpu, counts.gpu, choice.gpu, gate.gpu, route);
    same_integers(row, "route_rows' rows");
    same_integers(source, "route_rows' sources");
    same_integers(offsets, "route_rows' offsets");
    expect_close(counts, "route_rows' counts", 1e-12);
    expect_close(row_gate, "route_rows' gates", 1e-12);

    const Pair d_gate = random({N, k}, DType::F32), d_logits = output({N, E}, dtype());
    const Pair tally = accumulator({2}, DType::F32);
    const RouteLoss loss{N, 0.3, 0.2};
    const Tensor shares_cpu = counts.cpu.slice(0, E), shares_gpu = counts.gpu.slice(0, E);
    cpu_->route_backward(d_logits.cpu, tally.cpu, d_gate.cpu, logits.cpu, choice.cpu, stats.cpu, shares_cpu,
                         route, loss);
    gpu_->route_backward(d_logits.gpu, tally.gpu, d_gate.gpu, logits.gpu, choice.gpu, stats.gpu, shares_gpu,
                         route, loss);
    expect_close(d_logits, "route_backward");
    expect_close(tally, "route_backward's tally", 1e-5);
  }
}

// RoPE and attention with grouped-query heads, at head dims 64 and 128, over [B, seq] rows;
// positions and key_starts empty (a default Pair) for plain causal attention.
void CudaOps::rope_and_attention(int64_t seq, const Pair& positions, const Pair& key_starts) {
  const std::string resets = positions.cpu.empty() ? "" : " with resets";
  for (int head_dim : {64, 128}) {
    const std::string what = " hd=" + std::to_string(head_dim) + resets;
    const AttentionShape s{4, 2, head_dim};
    const int64_t W = s.qkv_width(), O = s.n_head * head_dim;
    cpu_->reserve({B, seq, s});
    gpu_->reserve({B, seq, s});
    std::vector<double> angles(static_cast<size_t>(seq * head_dim));
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        const double a = static_cast<double>(t) * std::pow(10000.0, -2.0 * i / head_dim);
        angles[static_cast<size_t>((t * head_dim / 2 + i) * 2)] = std::cos(a);
        angles[static_cast<size_t>((t * head_dim / 2 + i) * 2 + 1)] = std::sin(a);
      }
    const Pair table = output({seq, head_dim / 2, 2}, DType::F32);
    copy_from_doubles(*cpu_, table.cpu, angles);
    copy_from_doubles(*gpu_, table.gpu, angles);

    const Pair qkv = random({B, seq, W}, dtype());
    cpu_->rope_forward(qkv.cpu, table.cpu, s, positions.cpu);
    gpu_->rope_forward(qkv.gpu, table.gpu, s, positions.gpu);
    expect_close(qkv, "rope_forward" + what);
    // Attention then reads the rotated q and k as the GPU rounded them, on both sides.
    copy_from_doubles(*cpu_, qkv.cpu, copy_to_doubles(*gpu_, qkv.gpu));

    const Pair out = output({B, seq, O}, dtype()), lse = output({B * s.n_head * seq}, DType::F32);
    cpu_->attention_forward(out.cpu, lse.cpu, qkv.cpu, s, key_starts.cpu);
    gpu_->attention_forward(out.gpu, lse.gpu, qkv.gpu, s, key_starts.gpu);
    expect_close(out, "attention_forward" + what);
    expect_close(lse, "attention lse" + what, 1e-5);

    const Pair dout = random({B, seq, O}, dtype()), dqkv = output({B, seq, W}, dtype());
    cpu_->attention_backward(dqkv.cpu, dout.cpu, qkv.cpu, out.cpu, lse.cpu, s, key_starts.cpu);
    gpu_->attention_backward(dqkv.gpu, dout.gpu, qkv.gpu, out.gpu, lse.gpu, s, key_starts.gpu);
    expect_close(dqkv, "attention_backward" + what);
    cpu_->rope_backward(dqkv.cpu, table.cpu, s, positions.cpu);
    gpu_->rope_backward(dqkv.gpu, table.gpu, s, positions.gpu);
    expect_close(dqkv, "rope_backward" + what);
  }
}

TEST_P(CudaOps, RopeAndAttention) { rope_and_attention(T, Pair{}, Pair{}); }

// RoPE over the last 64 of each 192-wide head (DeepSeek-V3's latent attention), forward and back.
TEST_P(CudaOps, RopeOverTheTrailingDims) {
  const AttentionShape s{4, 4, 192, 64};
  std::vector<double> angles(static_cast<size_t>(T * 64));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < 32; ++i) {
      const double a = static_cast<double>(t) * std::pow(10000.0, -2.0 * i / 64);
      angles[static_cast<size_t>((t * 32 + i) * 2)] = std::cos(a);
      angles[static_cast<size_t>((t * 32 + i) * 2 + 1)] = std::sin(a);
    }
  const Pair table = output({T, 32, 2}, DType::F32);
  copy_from_doubles(*cpu_, table.cpu, angles);
  copy_from_doubles(*gpu_, table.gpu, angles);
  const Pair qkv = random({B, T, s.qkv_width()}, dtype());
  cpu_->rope_forward(qkv.cpu, table.cpu, s, Tensor{});
  gpu_->rope_forward(qkv.gpu, table.gpu, s, Tensor{});
  expect_close(qkv, "rope_forward over the trailing dims");
  cpu_->rope_backward(qkv.cpu, table.cpu, s, Tensor{});
  gpu_->rope_backward(qkv.gpu, table.gpu, s, Tensor{});
  expect_close(qkv, "rope_backward over the trailing dims");
}

// Rows of 200 tokens that pack documents of 1 to 129 tokens, so whole K/V tiles of earlier
// documents are skipped and tiles that hold a boundary are masked element by element.
TEST_P(CudaOps, RopeAndAttentionWithDocumentResets) {
  const auto [positions, key_starts] = document_resets(B, 200, {{0, 40, 41, 130}, {63, 64, 199}});
  rope_and_attention(200, positions, key_starts);
}

// Ring attention's block ops against the CPU twin: a rank holding chunks 1 and 2 of a
// 4-chunk sequence of 96 tokens (cp 2) meets its own block and the other rank's (chunks 0
// and 3), merging both, then runs both blocks' backward; with documents of 20 tokens.
TEST_P(CudaOps, RingAttentionBlocks) {
  const AttentionShape s{4, 2, 64};
  const int64_t chunk = 24, local = 2 * chunk, W = s.qkv_width(), O = s.n_head * s.head_dim;
  const int64_t KV = 2 * s.n_kv_head * s.head_dim;
  std::vector<int32_t> mine, theirs, starts;
  for (int64_t t = 0; t < chunk; ++t) {
    mine.push_back(static_cast<int32_t>(chunk + t));
    theirs.push_back(static_cast<int32_t>(t));
  }
  for (int64_t t = 0; t < chunk; ++t) {
    mine.push_back(static_cast<int32_t>(2 * chunk + t));
    theirs.push_back(static_cast<int32_t>(3 * chunk + t));
  }
  for (int64_t b = 0; b < B; ++b)
    for (int32_t t : mine) starts.push_back(t / 20 * 20);
  const Pair q_index = integers({local}, mine), k_index = integers({local}, theirs);
  const Pair key_starts = integers({B, local}, starts);
  const Pair qkv = random({B, local, W}, dtype()), other = random({B, local, W}, dtype());
  const Pair kv = output({B, local, KV}, dtype()), other_kv = output({B, local, KV}, dtype());
  cpu_->split_kv(kv.cpu, qkv.cpu, s);
  gpu_->split_kv(kv.gpu, qkv.gpu, s);
  expect_close(kv, "split_kv", 1e-7);
  cpu_->split_kv(other_kv.cpu, other.cpu, s);
  gpu_->split_kv(other_kv.gpu, other.gpu, s);
  const Pair out = output({B, local, O}, dtype()), lse = output({B, s.n_head, local}, DType::F32);
  cpu_->fill(out.cpu, 0.0);
  gpu_->fill(out.gpu, 0.0);
  cpu_->fill(lse.cpu, -std::numeric_limits<double>::infinity());
  gpu_->fill(lse.gpu, -std::numeric_limits<double>::infinity());
  for (const Pair* block : {&kv, &other_kv}) {
    const Pair& keys = block == &kv ? q_index : k_index;
    cpu_->ring_attention_forward(out.cpu, lse.cpu, qkv.cpu, block->cpu, q_index.cpu, keys.cpu, s, key_starts.cpu);
    gpu_->ring_attention_forward(out.gpu, lse.gpu, qkv.gpu, block->gpu, q_index.gpu, keys.gpu, s, key_starts.gpu);
  }
  expect_close(out, "ring_attention_forward");
  expect_close(lse, "ring_attention_forward lse", 1e-5);
  const Pair dout = random({B, local, O}, dtype());
  const Pair dqkv = accumulator({B, local, W}, dtype()), dkv = accumulator({B, local, KV}, dtype());
  const Pair other_dkv = accumulator({B, local, KV}, dtype());
  for (const Pair* block : {&kv, &other_kv}) {
    const Pair& keys = block == &kv ? q_index : k_index;
    const Pair& grad = block == &kv ? dkv : other_dkv;
    cpu_->ring_attention_backward(dqkv.cpu, grad.cpu, dout.cpu, qkv.cpu, block->cpu, out.cpu, lse.cpu, q_index.cpu,
                                  keys.cpu, s, key_starts.cpu);
    gpu_->ring_attention_backward(dqkv.gpu, grad.gpu, dout.gpu, qkv.gpu, block->gpu, out.gpu, lse.gpu, q_index.gpu,
                                  keys.gpu, s, key_starts.gpu);
  }
  expect_close(other_dkv, "ring_attention_backward dK, dV of the other block");
  cpu_->add_kv_gradient(dqkv.cpu, dkv.cpu, s);
  gpu_->add_kv_gradient(dqkv.gpu, dkv.gpu, s);
  expect_close(dqkv, "ring_attention_backward dQKV");
}

TEST_P(CudaOps, CrossEntropy) {
  const int64_t N = 150, Vp = 520, V = 513;
  const Pair logits = random({N, Vp}, dtype(), 3.0);
  // Targets up to Vp: those past V are another vocabulary-parallel rank's columns.
  const Pair targets = ids({N}, Vp, true);
  const Pair losses = output({N}, DType::F32), lse = output({N}, DType::F32);
  cpu_->cross_entropy_forward(losses.cpu, lse.cpu, logits.cpu, targets.cpu, V);
  gpu_->cross_entropy_forward(losses.gpu, lse.gpu, logits.gpu, targets.gpu, V);
  expect_close(losses, "cross_entropy losses", 1e-5);
  const Pair dlogits = output({N, Vp}, dtype());
  cpu_->cross_entropy_backward(dlogits.cpu, logits.cpu, lse.cpu, targets.cpu, V, 0.01);
  gpu_->cross_entropy_backward(dlogits.gpu, logits.gpu, lse.gpu, targets.gpu, V, 0.01);
  expect_close(dlogits, "cross_entropy_backward");
  // In place, as the model runs it: the logits turn into their gradient.
  gpu_->cross_entropy_backward(logits.gpu, logits.gpu, lse.gpu, targets.gpu, V, 0.01);
  expect_close({dlogits.cpu, logits.gpu}, "cross_entropy_backward in place");
}

TEST_P(CudaOps, AdamWOverSegments) {
  const int64_t n = 5000;
  std::vector<int64_t> rows = {0, 1000, 1, 1024, 3000, 0, 3008, 4990, 1};  // gaps untouched
  const Pair segments{alloc(*cpu_, cpu_memory_, {3, 3}, DType::I64),
                      alloc(*gpu_, gpu_memory_, {3, 3}, DType::I64)};
  cpu_->copy_from_host(segments.cpu, rows.data());
  gpu_->copy_from_host(segments.gpu, rows.data());
  const Pair master = random({n}, DType::F32), grad = random({n}, DType::F32);
  const Pair m = random({n}, DType::F32, 0.1), v = random({n}, DType::F32, 0.1);
  gpu_->scale(v.gpu, 0.0);  // second moments are non-negative: start both from zero
  cpu_->scale(v.cpu, 0.0);
  const Pair copy = random({n}, dtype());
  // The gradients come in scaled (a loss scale and a clip folded into one factor).
  const AdamWStep step{1e-3, 0.9, 0.95, 1e-8, 0.1, 3, 0.25, Tensor{}};
  cpu_->adamw(master.cpu, grad.cpu, m.cpu, v.cpu, Tensor{}, segments.cpu, step);
  gpu_->adamw(master.gpu, grad.gpu, m.gpu, v.gpu, dtype() == DType::F32 ? Tensor{} : copy.gpu,
              segments.gpu, step);
  expect_close(master, "adamw master", 1e-6);
  expect_close(m, "adamw m", 1e-6);
  expect_close(v, "adamw v", 1e-6);
  if (dtype() != DType::F32) {
    // The copy holds the updated master weights inside the segments, its old values outside.
    const std::vector<double> updated = copy_to_doubles(*cpu_, master.cpu);
    const std::vector<double> got = copy_to_doubles(*gpu_, copy.gpu);
    for (int64_t i : {0, 999, 1024, 2999, 3008, 4989})
      EXPECT_NEAR(got[static_cast<size_t>(i)], updated[static_cast<size_t>(i)],
                  1e-2 * std::abs(updated[static_cast<size_t>(i)]) + 1e-6)
          << "param copy [" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtype, CudaOps, testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kiln
