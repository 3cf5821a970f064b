// The one gate in front of every backend: CheckedOps owns a backend, checks each op's tensors
// (their shapes, and the dtypes ops.h's conventions fix) and forwards the call. make_cpu_ops and
// make_cuda_ops hand out their backend inside one, so a mismatch reads the same on the CPU and
// the GPU and each backend checks only what is its own: which dtypes its kernels take, its
// workspaces, its limits. Memory management, the stream, the attention's name, the products'
// fusing and tuning, FP8 support and capture are forwarded unchecked.
#pragma once

#include <memory>
#include <string>

#include "kernels/ops.h"

namespace kiln {

class CheckedOps final : public Ops {
 public:
  explicit CheckedOps(std::unique_ptr<Ops> backend);

  Device device() const override { return backend_->device(); }
  std::string name() const override { return backend_->name(); }

  void* allocate(size_t bytes) override { return backend_->allocate(bytes); }
  void release(void* ptr) override { backend_->release(ptr); }
  void* allocate_host(size_t bytes) override { return backend_->allocate_host(bytes); }
  void release_host(void* ptr) override { backend_->release_host(ptr); }
  void copy_to_host(void* host, const Tensor& src) override { backend_->copy_to_host(host, src); }
  void copy_from_host(const Tensor& dst, const void* host) override { backend_->copy_from_host(dst, host); }
  void copy_from_pinned(const Tensor& dst, const void* host) override { backend_->copy_from_pinned(dst, host); }
  void fill(const Tensor& x, double value) override { backend_->fill(x, value); }
  size_t available_memory() const override { return backend_->available_memory(); }
  size_t reserve(const OpLimits& limits) override { return backend_->reserve(limits); }
  std::string attention() const override { return backend_->attention(); }
  void synchronize() override { backend_->synchronize(); }
  void* stream() const override { return backend_->stream(); }
  void limit_threads(int threads) override { backend_->limit_threads(threads); }
  void fuse_products(bool on) override { backend_->fuse_products(on); }
  std::string fp8_unsupported() const override { return backend_->fp8_unsupported(); }
  void tune_products(bool on) override { backend_->tune_products(on); }
  std::string product_tuning() const override { return backend_->product_tuning(); }
  std::unique_ptr<OpGraph> capture(const std::function<void()>& queue, std::string& why) override {
    return backend_->capture(queue, why);
  }

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
  void scale(const Tensor& x, double factor) override { backend_->scale(x, factor); }
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
  void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits,
                             const Tensor& targets, int64_t vocab_size) override;
  void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                              const Tensor& targets, int64_t vocab_size, double dloss) override;
  void adamw(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
             const Tensor& param_copy, const Tensor& segments, const AdamWStep& step) override;
  void clip_factor(const Tensor& scalars) override;

 private:
  // The dtype this backend keeps what ops.h calls "F32 (F64 when computing in F64)" in, for
  // activations of dtype `compute`: statistics, log-sum-exps, parameter gradients, a product's
  // widened output. The CPU keeps them in its compute dtype (F32 or F64), CUDA in F32.
  DType wide(DType compute) const { return device_ == Device::Cpu ? compute : DType::F32; }
  void check_rope(const Tensor& qkv, const Tensor& table, AttentionShape shape, const Tensor& positions) const;

  std::unique_ptr<Ops> backend_;
  Device device_;
};

}  // namespace kiln
