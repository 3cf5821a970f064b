// The CPU backend: picks the scalar type and calls the bodies in kernels/cpu/kernels.h.
// make_cpu_ops hands it out inside CheckedOps, which has checked each op's tensors; what is
// checked here is the CPU's own: the dtypes it computes in, its attention scratch, the
// optimizer's segment table.
#include <omp.h>

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/checked_ops.h"
#include "kernels/expert_products.h"
#include "kernels/fused_matmul.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/kernels.h"
#include "kernels/fp8_meta.h"
#include "kernels/cpu/openblas_core.h"
#include "kernels/ops.h"

namespace kiln {

namespace {

// Calls fn(T{}) with T the scalar type of x.
template <typename Fn>
void dispatch(const Tensor& x, Fn&& fn) {
  switch (x.dtype) {
    case DType::F32: fn(float{}); return;
    case DType::F64: fn(double{}); return;
    case DType::I32:
    case DType::I64:
    case DType::BF16:
    case DType::F16:
    case DType::E4M3:
    case DType::E5M2: break;
  }
  fail(std::string("cpu ops: fp32 or fp64 tensor expected, got ") + dtype_name(x.dtype));
}

cpu::HeadLayout head_layout(const Tensor& qkv, AttentionShape s) {
  return {qkv.shape[0], qkv.shape[1], s.n_head, s.n_kv_head, s.head_dim, s.rotated_dim()};
}

class CpuOps final : public Ops {
 public:
  // OpenBLAS runs each product on one thread; kiln's own threads split the rows
  // (kernels/cpu/blas.cpp), so the bits do not depend on the thread count.
  explicit CpuOps(int threads) : threads_(threads) { omp_set_num_threads(threads_); }
  void limit_threads(int threads) override {
    // The scratch holds threads_ slices, so the team only ever shrinks from there.
    omp_set_num_threads(std::clamp(threads, 1, threads_));
  }
  ~CpuOps() override { std::free(scratch_); }

  Device device() const override { return Device::Cpu; }
  std::string name() const override {
    return "cpu (" + std::to_string(threads_) + " threads, OpenBLAS " + openblas_core() + ")";
  }

  void* allocate(size_t bytes) override {
    // 64-byte alignment: whole cache lines, and room for AVX-512 loads.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    KILN_CHECK(p != nullptr, "out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, bytes);
    return p;
  }
  void release(void* ptr) override { std::free(ptr); }
  void* allocate_host(size_t bytes) override { return allocate(bytes); }
  void release_host(void* ptr) override { release(ptr); }
  void copy_to_host(void* host, const Tensor& src) override {
    std::memcpy(host, src.data, src.bytes());
  }
  void copy_from_host(const Tensor& dst, const void* host) override {
    std::memcpy(dst.data, host, dst.bytes());
  }
  void copy_from_pinned(const Tensor& dst, const void* host) override { copy_from_host(dst, host); }
  void fill(const Tensor& x, double value) override {
    if (x.dtype == DType::I32) {
      cpu::fill(x.as<int32_t>(), x.numel(), static_cast<int32_t>(value));
      return;
    }
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::fill(x.as<T>(), x.numel(), static_cast<T>(value));
    });
  }

  void cast(const Tensor& out, const Tensor& x) override {
    dispatch(out, [&](auto to) {
      dispatch(x, [&](auto from) {
        using To = decltype(to);
        using From = decltype(from);
        const From* src = x.as<From>();
        To* dst = out.as<To>();
        for (int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<To>(src[i]);
      });
    });
  }
  void fill_normal(const Tensor& x, const RandomRuns& runs, uint64_t seed, uint64_t stream, double mean,
                   double std) override {
    cpu::fill_normal(x.data, x.dtype, runs, seed, stream, mean, std);
  }

  size_t available_memory() const override {
    return static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  }

  size_t reserve(const OpLimits& limits) override {
    std::free(scratch_);
    scratch_bytes_ = static_cast<size_t>(threads_) *
                     cpu::attention_scratch_bytes(limits.seq_len, limits.heads.head_dim);
    scratch_ = allocate(scratch_bytes_);
    return scratch_bytes_;
  }

  void synchronize() override {}

  void matmul(const Tensor& out, const Tensor& a, bool ta, const Tensor& b, bool tb,
              bool accumulate) override {
    const int64_t M = ta ? a.shape.cols() : a.shape.rows();
    const int64_t K = ta ? a.shape.rows() : a.shape.cols();
    const int64_t N = tb ? b.shape.rows() : b.shape.cols();
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::gemm<T>(ta, tb, M, N, K, T(1), a.as<T>(), a.shape.cols(), b.as<T>(), b.shape.cols(),
                   accumulate ? T(1) : T(0), out.as<T>(), N);
    });
  }

  void add_bias(const Tensor& out, const Tensor& bias) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::add_bias(out.as<T>(), bias.as<T>(), out.shape.rows(), out.shape.cols());
    });
  }
  void add_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::add_columns(out.as<T>(), x.as<T>(), out.shape.rows(), out.shape.cols(), x.shape.cols(), first,
                       static_cast<T>(factor));
    });
  }
  void take_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::take_columns(out.as<T>(), x.as<T>(), x.shape.rows(), x.shape.cols(), out.shape.cols(), first,
                        static_cast<T>(factor));
    });
  }
  void copy_head_columns(const Tensor& out, const Tensor& x, const HeadColumns& columns) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::copy_head_columns(out.as<T>(), x.as<T>(), x.shape.rows(), out.shape.cols(), x.shape.cols(), columns);
    });
  }
  void dropout(const Tensor& out, const Tensor& x, const DropoutMask& mask, bool accumulate) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::dropout(out.as<T>(), x.as<T>(), x.shape.rows(), x.shape.cols(), mask, accumulate);
    });
  }
  void bias_backward(const Tensor& dbias, const Tensor& dout) override {
    dispatch(dout, [&](auto t) {
      using T = decltype(t);
      cpu::bias_backward(dbias.as<T>(), dout.as<T>(), dout.shape.rows(), dout.shape.cols());
    });
  }
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::add(out.as<T>(), a.as<T>(), b.as<T>(), out.numel());
    });
  }
  void scale(const Tensor& x, double factor) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::scale(x.as<T>(), x.numel(), static_cast<T>(factor));
    });
  }
  void sum_squares(const Tensor& sum, const Tensor& x) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      *sum.as<double>() += cpu::sum_squares(x.as<T>(), x.numel());
    });
  }

  // The fused products are the separate ops, in their order: results bit for bit theirs.
  void matmul_bias(const Tensor& out, const Tensor& x, const Tensor& weight,
                   const Tensor& bias) override {
    composed_matmul_bias(*this, out, x, weight, bias);
  }
  void matmul_bias_gelu(const Tensor& out, const Tensor& pre, const Tensor& x,
                        const Tensor& weight, const Tensor& bias) override {
    composed_matmul_bias_gelu(*this, out, pre, x, weight, bias);
  }
  void matmul_bias_grad(const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                        const Tensor& x) override {
    composed_matmul_bias_grad(*this, dweight, dbias, dy, x);
  }
  void matmul_dgelu(const Tensor& dx, const Tensor& dy, const Tensor& weight,
                    const Tensor& pre) override {
    composed_matmul_dgelu(*this, dx, dy, weight, pre);
  }

  // FP8 on the CPU is an emulation of the device's products (kernels/cpu/fp8.h): the same
  // codes and scales, products of the decoded codes in fp32.
  void fp8_cast_transpose(const Tensor& codes, const Tensor& codes_t, const Tensor& meta,
                          const Tensor& x) override {
    const Fp8Format format = cast_format(codes, codes_t);
    KILN_CHECK(x.dtype == DType::F32, std::string("fp8_cast_transpose: fp32 x expected, got ") + dtype_name(x.dtype));
    cpu::fp8_cast_transpose(codes.as<uint8_t>(), codes_t.as<uint8_t>(), meta.as<float>(), x.as<float>(),
                            x.shape.rows(), x.shape.cols(), format);
  }
  void fp8_current_scale(const Tensor& meta, const Tensor& x, DType format, int margin) override {
    KILN_CHECK(x.dtype == DType::F32, std::string("fp8_current_scale: fp32 x expected, got ") + dtype_name(x.dtype));
    cpu::fp8_current_scale(meta.as<float>(), x.as<float>(), x.numel(), fp8_format(format, "fp8_current_scale"),
                           margin);
  }
  void fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b, const Tensor& b_meta,
                  bool accumulate) override {
    KILN_CHECK(out.dtype == DType::F32, std::string("fp8_matmul: fp32 out expected, got ") + dtype_name(out.dtype));
    cpu::fp8_matmul(out.as<float>(), a.as<uint8_t>(), fp8_format(a.dtype, "fp8_matmul"), a_meta.as<float>(),
                    b.as<uint8_t>(), fp8_format(b.dtype, "fp8_matmul"), b_meta.as<float>(), a.shape.rows(),
                    b.shape.rows(), a.shape.cols(), accumulate);
  }
  std::string fp8_unsupported() const override { return ""; }

  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte,
                         const Tensor& wpe, const Tensor& positions) override {
    const int32_t* position_ids = per_token_values(positions);
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cpu::embedding_forward(out.as<T>(), tokens.as<int32_t>(), position_ids, wte.as<T>(),
                             wpe.empty() ? nullptr : wpe.as<T>(), tokens.shape[0],
                             tokens.shape[1], wte.shape.cols(), wte.shape[0]);
    });
  }
  void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& tokens,
                          const Tensor& dout, const Tensor& positions) override {
    const int32_t* position_ids = per_token_values(positions);
    dispatch(dout, [&](auto t) {
      using T = decltype(t);
      cpu::embedding_backward(dwte.as<T>(), dwpe.empty() ? nullptr : dwpe.as<T>(),
                              tokens.as<int32_t>(), position_ids, dout.as<T>(), tokens.shape[0],
                              tokens.shape[1], dwte.shape.cols(), dwte.shape[0]);
    });
  }

  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                         const Tensor& x, const Tensor& weight, const Tensor& bias,
                         double eps) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::layernorm_forward(out.as<T>(), mean.as<T>(), rstd.as<T>(), x.as<T>(), weight.as<T>(),
                             bias.as<T>(), x.shape.rows(), x.shape.cols(), eps);
    });
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                          const Tensor& dout, const Tensor& x, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::layernorm_backward(dx.as<T>(), dweight.as<T>(), dbias.as<T>(), dout.as<T>(), x.as<T>(),
                              weight.as<T>(), mean.as<T>(), rstd.as<T>(), x.shape.rows(),
                              x.shape.cols());
    });
  }
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, double eps) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::rmsnorm_forward(out.as<T>(), rstd.as<T>(), x.as<T>(), weight.as<T>(), x.shape.rows(),
                           x.shape.cols(), eps);
    });
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout,
                        const Tensor& x, const Tensor& weight, const Tensor& rstd) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::rmsnorm_backward(dx.as<T>(), dweight.as<T>(), dout.as<T>(), x.as<T>(), weight.as<T>(),
                            rstd.as<T>(), x.shape.rows(), x.shape.cols());
    });
  }

  void gelu_forward(const Tensor& out, const Tensor& x) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::gelu_forward(out.as<T>(), x.as<T>(), x.numel());
    });
  }
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::gelu_backward(dx.as<T>(), x.as<T>(), dout.as<T>(), x.numel());
    });
  }
  void route_tokens(const Tensor& choice, const Tensor& gate, const Tensor& stats, const Tensor& logits,
                    const Tensor& bias, const ExpertRoute& route) override {
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cpu::route_tokens(choice.as<int32_t>(), gate.as<T>(), stats.as<T>(), logits.as<T>(), bias.as<T>(),
                        logits.shape.rows(), route);
    });
  }
  void route_rows(const Tensor& row, const Tensor& source, const Tensor& row_gate, const Tensor& offsets,
                  const Tensor& counts, const Tensor& choice, const Tensor& gate, const ExpertRoute& route) override {
    dispatch(gate, [&](auto t) {
      using T = decltype(t);
      cpu::route_rows(row.as<int32_t>(), source.as<int32_t>(), row_gate.as<T>(), offsets.as<int32_t>(),
                      counts.as<T>(), choice.as<int32_t>(), gate.as<T>(), choice.shape.rows(), route);
    });
  }
  void route_backward(const Tensor& d_logits, const Tensor& tally, const Tensor& d_gate, const Tensor& logits,
                      const Tensor& choice, const Tensor& stats, const Tensor& shares, const ExpertRoute& route,
                      const RouteLoss& loss) override {
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cpu::route_backward(d_logits.as<T>(), tally.empty() ? nullptr : tally.as<T>(), d_gate.as<T>(),
                          logits.as<T>(), choice.as<int32_t>(), stats.as<T>(), shares.as<T>(),
                          logits.shape.rows(), route, loss);
    });
  }
  void gather_rows(const Tensor& out, const Tensor& x, const Tensor& rows,
                   const Tensor& weights) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::gather_rows(out.as<T>(), x.as<T>(), rows.as<int32_t>(),
                       weights.empty() ? nullptr : weights.as<T>(), out.shape.rows(),
                       out.shape.cols());
    });
  }
  void combine_rows(const Tensor& out, const Tensor& x, const Tensor& rows, const Tensor& weights,
                    bool accumulate) override {
    const int64_t k = out.shape.rows() > 0 ? rows.numel() / out.shape.rows() : 1;
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::combine_rows(out.as<T>(), x.as<T>(), rows.as<int32_t>(),
                        weights.empty() ? nullptr : weights.as<T>(), out.shape.rows(), k,
                        out.shape.cols(), accumulate);
    });
  }
  void row_dots(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& rows) override {
    const int64_t k = a.shape.rows() > 0 ? rows.numel() / a.shape.rows() : 1;
    dispatch(a, [&](auto t) {
      using T = decltype(t);
      cpu::row_dots(out.as<T>(), a.as<T>(), b.as<T>(), rows.as<int32_t>(), a.shape.rows(), k,
                    a.shape.cols());
    });
  }
  void expert_matmul(const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                     const std::vector<int64_t>& offsets) override {
    expert_matmul_by_expert(*this, out, x, w, transpose_w, offsets);
  }
  void expert_weight_grad(const Tensor& dw, const Tensor& dy, const Tensor& x,
                          const std::vector<int64_t>& offsets) override {
    expert_weight_grad_by_expert(*this, dw, dy, x, offsets);
  }
  void swiglu_forward(const Tensor& out, const Tensor& x) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::swiglu_forward(out.as<T>(), x.as<T>(), out.shape.rows(), out.shape.cols());
    });
  }
  void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cpu::swiglu_backward(dx.as<T>(), x.as<T>(), dout.as<T>(), dout.shape.rows(),
                           dout.shape.cols());
    });
  }

  void rope_forward(const Tensor& qkv, const Tensor& table, AttentionShape s,
                    const Tensor& positions) override {
    rope(qkv, table, s, positions, false);
  }
  void rope_backward(const Tensor& dqkv, const Tensor& table, AttentionShape s,
                     const Tensor& positions) override {
    rope(dqkv, table, s, positions, true);
  }

  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv,
                         AttentionShape s, const Tensor& key_starts) override {
    const cpu::HeadLayout layout = head_layout(qkv, s);
    check_scratch(layout);
    const int32_t* starts = per_token_values(key_starts);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cpu::attention_forward(out.as<T>(), lse.as<T>(), qkv.as<T>(), starts, layout,
                             static_cast<T*>(scratch_));
    });
  }
  void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                          const Tensor& out, const Tensor& lse, AttentionShape s,
                          const Tensor& key_starts) override {
    const cpu::HeadLayout layout = head_layout(qkv, s);
    check_scratch(layout);
    const int32_t* starts = per_token_values(key_starts);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cpu::attention_backward(dqkv.as<T>(), dout.as<T>(), qkv.as<T>(), out.as<T>(), lse.as<T>(),
                              starts, layout, static_cast<T*>(scratch_));
    });
  }
  void ring_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, const Tensor& kv,
                              const Tensor& q_index, const Tensor& k_index, AttentionShape s,
                              const Tensor& key_starts) override {
    const cpu::HeadLayout layout = head_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cpu::ring_attention_forward(out.as<T>(), lse.as<T>(), qkv.as<T>(), kv.as<T>(), q_index.as<int32_t>(),
                                  k_index.as<int32_t>(), per_token_values(key_starts), layout, kv.shape[1]);
    });
  }
  void ring_attention_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                               const Tensor& kv, const Tensor& out, const Tensor& lse, const Tensor& q_index,
                               const Tensor& k_index, AttentionShape s, const Tensor& key_starts) override {
    const cpu::HeadLayout layout = head_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cpu::ring_attention_backward(dqkv.as<T>(), dkv.as<T>(), dout.as<T>(), qkv.as<T>(), kv.as<T>(),
                                   out.as<T>(), lse.as<T>(), q_index.as<int32_t>(), k_index.as<int32_t>(),
                                   per_token_values(key_starts), layout, kv.shape[1]);
    });
  }
  void split_kv(const Tensor& kv, const Tensor& qkv, AttentionShape s) override {
    const cpu::HeadLayout layout = head_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cpu::split_kv(kv.as<T>(), qkv.as<T>(), layout);
    });
  }
  void add_kv_gradient(const Tensor& dqkv, const Tensor& dkv, AttentionShape s) override {
    const cpu::HeadLayout layout = head_layout(dqkv, s);
    dispatch(dqkv, [&](auto t) {
      using T = decltype(t);
      cpu::add_kv_gradient(dqkv.as<T>(), dkv.as<T>(), layout);
    });
  }
  void attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& qkv, int64_t pos, AttentionShape s) override {
    const cpu::HeadLayout layout = head_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cpu::attention_decode(out.as<T>(), k_cache.as<T>(), v_cache.as<T>(), qkv.as<T>(), layout,
                            k_cache.shape[1], pos);
    });
  }

  void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits,
                             const Tensor& targets, int64_t vocab_size) override {
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cpu::cross_entropy_forward(losses.as<T>(), lse.as<T>(), logits.as<T>(),
                                 targets.as<int32_t>(), logits.shape.rows(), logits.shape.cols(),
                                 vocab_size);
    });
  }
  void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                              const Tensor& targets, int64_t vocab_size, double dloss) override {
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cpu::cross_entropy_backward(dlogits.as<T>(), logits.as<T>(), lse.as<T>(),
                                  targets.as<int32_t>(), logits.shape.rows(), logits.shape.cols(),
                                  vocab_size, dloss);
    });
  }

  // The CPU trains in its compute dtype, so the master weights are the parameters
  // themselves and there is no copy to write.
  void adamw(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
             const Tensor& param_copy, const Tensor& segments, const AdamWStep& s) override {
    KILN_CHECK(param_copy.empty(), "adamw: the CPU backend keeps no parameter copy");
    const int64_t* table = segments.as<int64_t>();
    for (int64_t i = 0; i < segments.shape[0]; ++i) {
      const int64_t begin = table[3 * i], end = table[3 * i + 1];
      KILN_CHECK(begin >= 0 && begin <= end && end <= master.numel(), "adamw: bad segment");
      // The CUDA kernel walks the rows in order; the twin refuses a table it would mis-walk.
      KILN_CHECK(i == 0 || begin >= table[3 * i - 2],
                 "adamw: segment " + std::to_string(i) + " begins at " + std::to_string(begin) +
                     ", before segment " + std::to_string(i - 1) + " ends at " + std::to_string(table[3 * i - 2]) +
                     ": the table must be sorted by begin, without overlaps");
    }
    const double* scalars = s.scalars.empty() ? nullptr : s.scalars.as<double>();
    if (scalars && scalars[kSkip] != 0) return;
    const AdamWTerms terms = scalars ? AdamWTerms{scalars[kStepSize], scalars[kRootCorrection2], scalars[kDecay]}
                                     : adamw_terms(s.lr, s.beta1, s.beta2, s.weight_decay, s.step);
    const double grad_scale = scalars ? scalars[kGradScale] : s.grad_scale;
    dispatch(master, [&](auto t) {
      using T = decltype(t);
      for (int64_t i = 0; i < segments.shape[0]; ++i) {
        const int64_t begin = table[3 * i], end = table[3 * i + 1];
        cpu::adamw(master.as<T>() + begin, grad.as<T>() + begin, m.as<T>() + begin,
                   v.as<T>() + begin, end - begin, terms, table[3 * i + 2] != 0, s.beta1, s.beta2,
                   s.eps, grad_scale);
      }
    });
  }
  void clip_factor(const Tensor& scalars) override { clip_rule(scalars.as<double>()); }

  std::unique_ptr<OpGraph> capture(const std::function<void()>&, std::string& why) override {
    why = "the CPU backend runs each op as it is called";
    return nullptr;
  }

 private:
  void rope(const Tensor& qkv, const Tensor& table, AttentionShape s, const Tensor& positions,
            bool inverse) {
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cpu::rope(qkv.as<T>(), table.as<T>(), per_token_values(positions), head_layout(qkv, s), inverse);
    });
  }
  void check_scratch(const cpu::HeadLayout& layout) const {
    KILN_CHECK(static_cast<size_t>(threads_) * cpu::attention_scratch_bytes(layout.seq,
                                                                            layout.head_dim) <=
                   scratch_bytes_,
               "attention: reserve() was not called for sequence length " +
                   std::to_string(layout.seq) + ", head dim " + std::to_string(layout.head_dim));
  }

  int threads_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops(int threads) {
  return std::make_unique<CheckedOps>(std::make_unique<CpuOps>(threads));
}

}  // namespace kiln
