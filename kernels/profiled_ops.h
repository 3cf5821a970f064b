// A per-op profile of whatever runs on an op table: ProfiledOps wraps another Ops, forwards
// every call to it and times each compute op between two synchronizations of the inner ops,
// so the time is the op's own (launch overlap between ops is lost: the sum over the ops is a
// little more than an unprofiled step). Each record also carries the op's FLOPs and the least
// bytes it must move, so the caller can set the time against its floor on a device
// (bench/step_benchmark.cpp --profile). Memory management (allocate, release, their host twins,
// reserve, available_memory, synchronize), the stream, the attention's name and the products'
// fusing and tuning are forwarded without a record.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"

namespace kiln {

// One op at one shape, summed over its calls.
struct OpProfile {
  std::string op;     // "matmul"
  std::string shape;  // "16384x2304x768 bf16->bf16 nt": the main tensor's shape and dtype
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;  // tensor-core work only (matmul, attention); see profiled_ops.cpp
  double bytes = 0;  // each input read once, each output written once, in their dtypes
};

class ProfiledOps final : public Ops {
 public:
  explicit ProfiledOps(Ops& inner) : inner_(inner) {}

  // The records, the most time first.
  std::vector<OpProfile> report() const;
  void reset() { records_.clear(); }

  Device device() const override { return inner_.device(); }
  std::string name() const override { return inner_.name(); }

  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void release(void* ptr) override { inner_.release(ptr); }
  void* allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  void release_host(void* ptr) override { inner_.release_host(ptr); }
  void* stream() const override { return inner_.stream(); }
  size_t available_memory() const override { return inner_.available_memory(); }
  size_t reserve(const OpLimits& limits) override { return inner_.reserve(limits); }
  std::string attention() const override { return inner_.attention(); }
  void fuse_products(bool on) override { inner_.fuse_products(on); }
  void tune_products(bool on) override { inner_.tune_products(on); }
  std::string product_tuning() const override { return inner_.product_tuning(); }
  void synchronize() override { inner_.synchronize(); }

  void copy_to_host(void* host, const Tensor& src) override;
  void copy_from_host(const Tensor& dst, const void* host) override;
  void copy_from_pinned(const Tensor& dst, const void* host) override;
  void fill(const Tensor& x, double value) override;
  void cast(const Tensor& out, const Tensor& x) override;
  void fill_normal(const Tensor& x, const RandomRuns& runs, uint64_t seed, uint64_t stream, double mean,
                   double std) override;
  void matmul(const Tensor& out, const Tensor& a, bool transpose_a, const Tensor& b,
              bool transpose_b, bool accumulate) override;
  void add_bias(const Tensor& out, const Tensor& bias) override;
  void add_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) override;
  void take_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) override;
  void copy_head_columns(const Tensor& out, const Tensor& x, const HeadColumns& columns) override;
  void dropout(const Tensor& out, const Tensor& x, const DropoutMask& mask, bool accumulate) override;
  void bias_backward(const Tensor& dbias, const Tensor& dout) override;
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void scale(const Tensor& x, double factor) override;
  void sum_squares(const Tensor& sum, const Tensor& x) override;
  void matmul_bias(const Tensor& out, const Tensor& x, const Tensor& weight,
                   const Tensor& bias) override;
  void matmul_bias_gelu(const Tensor& out, const Tensor& pre, const Tensor& x,
                        const Tensor& weight, const Tensor& bias) override;
  void matmul_bias_grad(const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                        const Tensor& x) override;
  void matmul_dgelu(const Tensor& dx, const Tensor& dy, const Tensor& weight,
                    const Tensor& pre) override;
  void fp8_cast_transpose(const Tensor& codes, const Tensor& codes_t, const Tensor& meta,
                          const Tensor& x) override;
  void fp8_current_scale(const Tensor& meta, const Tensor& x, DType format, int margin) override;
  void fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b,
                  const Tensor& b_meta, bool accumulate) override;
  std::string fp8_unsupported() const override { return inner_.fp8_unsupported(); }
  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte,
                         const Tensor& wpe, const Tensor& positions) override;
  void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& tokens,
                          const Tensor& dout, const Tensor& positions) override;
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                         const Tensor& x, const Tensor& weight, const Tensor& bias,
                         double eps) override;
  void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                          const Tensor& dout, const Tensor& x, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd) override;
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, double eps) override;
  void rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout,
                        const Tensor& x, const Tensor& weight, const Tensor& rstd) override;
  void gelu_forward(const Tensor& out, const Tensor& x) override;
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) override;
  void route_tokens(const Tensor& choice, const Tensor& gate, const Tensor& stats, const Tensor& logits,
                    const Tensor& bias, const ExpertRoute& route) override;
  void route_rows(const Tensor& row, const Tensor& source, const Tensor& row_gate, const Tensor& offsets,
                  const Tensor& counts, const Tensor& choice, const Tensor& gate, const ExpertRoute& route) override;
  void route_backward(const Tensor& d_logits, const Tensor& tally, const Tensor& d_gate, const Tensor& logits,
                      const Tensor& choice, const Tensor& stats, const Tensor& shares, const ExpertRoute& route,
                      const RouteLoss& loss) override;
  void gather_rows(const Tensor& out, const Tensor& x, const Tensor& rows,
                   const Tensor& weights) override;
  void combine_rows(const Tensor& out, const Tensor& x, const Tensor& rows, const Tensor& weights,
                    bool accumulate) override;
  void row_dots(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& rows) override;
  void expert_matmul(const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                     const std::vector<int64_t>& offsets) override;
  void expert_weight_grad(const Tensor& dw, const Tensor& dy, const Tensor& x,
                          const std::vector<int64_t>& offsets) override;
  void swiglu_forward(const Tensor& out, const Tensor& x) override;
  void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) override;
  void rope_forward(const Tensor& qkv, const Tensor& table, AttentionShape shape,
                    const Tensor& positions) override;
  void rope_backward(const Tensor& dqkv, const Tensor& table, AttentionShape shape,
                     const Tensor& positions) override;
  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv,
                         AttentionShape shape, const Tensor& key_starts) override;
  void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                          const Tensor& out, const Tensor& lse, AttentionShape shape,
                          const Tensor& key_starts) override;
  void ring_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, const Tensor& kv,
                              const Tensor& q_index, const Tensor& k_index, AttentionShape shape,
                              const Tensor& key_starts) override;
  void ring_attention_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                               const Tensor& kv, const Tensor& out, const Tensor& lse, const Tensor& q_index,
                               const Tensor& k_index, AttentionShape shape, const Tensor& key_starts) override;
  void split_kv(const Tensor& kv, const Tensor& qkv, AttentionShape shape) override;
  void add_kv_gradient(const Tensor& dqkv, const Tensor& dkv, AttentionShape shape) override;
  void attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& qkv, int64_t pos, AttentionShape shape) override;
  void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits,
                             const Tensor& targets, int64_t vocab_size) override;
  void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                              const Tensor& targets, int64_t vocab_size, double dloss) override;
  void adamw(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
             const Tensor& param_copy, const Tensor& segments, const AdamWStep& step) override;
  void clip_factor(const Tensor& scalars) override;
  // Waiting for the device around every op, a profiled step cannot be captured.
  std::unique_ptr<OpGraph> capture(const std::function<void()>&, std::string& why) override {
    why = "the profiler waits for the device around every op";
    return nullptr;
  }

 private:
  // Runs `call` between two synchronizations and adds its time, flops and bytes to the
  // record of (op, shape).
  template <typename Call>
  void timed(const char* op, const std::string& shape, double flops, double bytes, Call&& call) {
    inner_.synchronize();
    const auto start = std::chrono::steady_clock::now();
    call();
    inner_.synchronize();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    OpProfile& record = records_[{op, shape}];
    record.calls += 1;
    record.seconds += elapsed.count();
    record.flops += flops;
    record.bytes += bytes;
  }

  Ops& inner_;
  std::map<std::pair<std::string, std::string>, OpProfile> records_;
};

}  // namespace kiln
