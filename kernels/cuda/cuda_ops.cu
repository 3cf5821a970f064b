// The CUDA backend: picks the element type and launches the bodies in kernels/cuda/kernels.cuh
// on the backend's stream. make_cuda_ops hands it out inside CheckedOps, which has checked each
// op's tensors; what is checked here is CUDA's own: the dtypes its kernels take, its workspace,
// cuDNN's support. Memory comes from plain
// cudaMalloc, once, through the arenas; matrix products go through cuBLASLt; attention goes
// through cuDNN's fused attention or kiln's kernels, as backend.attention says. capture()
// records what a step queues on the stream as a CUDA graph, replayed by one launch.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "base/check.h"
#include "kernels/checked_ops.h"
#include "kernels/cudnn_attention_support.h"
#include "kernels/expert_products.h"
#include "kernels/fp8_meta.h"
#include "kernels/fused_matmul.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/fp8_matmul.h"
#include "kernels/cuda/fused_matmul.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/ops.h"

namespace kiln {

namespace {

// Calls fn(T{}) with T the element type of an activation or parameter tensor.
template <typename Fn>
void dispatch(const Tensor& x, Fn&& fn) {
  switch (x.dtype) {
    case DType::F32: fn(float{}); return;
    case DType::BF16: fn(__nv_bfloat16{}); return;
    case DType::F16: fn(__half{}); return;
    default: break;
  }
  fail(std::string("cuda ops: fp32, bf16 or fp16 tensor expected, got ") + dtype_name(x.dtype));
}

cudaDataType cuda_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: break;
  }
  fail(std::string("cuda matmul: unsupported dtype ") + dtype_name(dtype));
}

void expect_f32(const Tensor& t, const char* what) {
  KILN_CHECK(t.dtype == DType::F32, std::string(what) + " must be fp32, got " + dtype_name(t.dtype));
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data);
}

cuda::HeadLayout head_layout(const Tensor& qkv, AttentionShape s) {
  return {qkv.shape[0], qkv.shape[1], s.n_head, s.n_kv_head, s.head_dim, s.rotated_dim()};
}

// The ring's kernels keep up to 8 values of a row per lane.
cuda::HeadLayout ring_layout(const Tensor& qkv, AttentionShape s) {
  KILN_CHECK(s.head_dim <= 256, "ring attention: head_dim " + std::to_string(s.head_dim) + " above 256");
  return head_layout(qkv, s);
}

// Every pointer cuDNN's graphs read or write is 16-byte aligned (their tensors say so).
bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// An instantiated graph, replayed on the stream it was captured from.
class CudaGraph final : public OpGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  void launch() override { KILN_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

class CudaOps final : public Ops {
 public:
  CudaOps(int device, AttentionChoice attention) : device_(device), attention_(attention) {
    KILN_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp prop{};
    KILN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    name_ = "cuda:" + std::to_string(device_) + " (" + prop.name + ")";
    compute_capability_ = prop.major * 10 + prop.minor;
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    matmul_ = std::make_unique<cuda::Matmul>();
    grouped_ = std::make_unique<cuda::GroupedGemm>();
    KILN_CUDA_CHECK(cudaMalloc(&sum_partials_, cuda::kSumSquaresPartials * sizeof(double)));
    KILN_CUDA_CHECK(cudaMalloc(&route_scratch_, cuda::route_scratch_bytes()));
    if (attention_ != AttentionChoice::Kiln) {
      std::string why;
      cudnn_ = cuda::CudnnAttention::open(stream_, why);
      KILN_CHECK(cudnn_ || attention_ == AttentionChoice::Auto,
                 "backend.attention=cudnn: cuDNN cannot be loaded (" + why +
                     "); put cuDNN 9's lib folder on LD_LIBRARY_PATH (docs/gpu.md), or use "
                     "backend.attention=auto");
      if (!cudnn_) attention_text_ = "kiln's kernels (cuDNN not loaded: " + why + ")";
    }
  }
  ~CudaOps() override {
    cudnn_.reset();  // its handle runs on stream_
    cudaFree(sum_partials_);
    cudaFree(route_scratch_);
    cudaFree(workspace_);
    grouped_.reset();  // its handle works on stream_ with matmul_'s workspace
    matmul_.reset();
    fp8_matmul_.reset();
    cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::Cuda; }
  std::string name() const override { return name_; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
    KILN_CHECK(status == cudaSuccess, "out of GPU memory allocating " + std::to_string(bytes) +
                                          " bytes on " + name_ + ": " + cudaGetErrorString(status));
    // Waited for, so work on any stream (a communicator's) finds the memory zeroed; memory is
    // allocated before step 1 only.
    KILN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    KILN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return p;
  }
  void release(void* ptr) override { cudaFree(ptr); }
  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaMallocHost(&p, bytes == 0 ? 256 : bytes);
    KILN_CHECK(status == cudaSuccess, "out of page-locked host memory allocating " +
                                          std::to_string(bytes) + " bytes: " + cudaGetErrorString(status));
    return p;
  }
  void release_host(void* ptr) override { cudaFreeHost(ptr); }
  void* stream() const override { return stream_; }
  void copy_to_host(void* host, const Tensor& src) override {
    KILN_CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, stream_));
    KILN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy_from_host(const Tensor& dst, const void* host) override {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, stream_));
    KILN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy_from_pinned(const Tensor& dst, const void* host) override {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, stream_));
  }
  void fill(const Tensor& x, double value) override {
    if (x.dtype == DType::I32 || x.dtype == DType::I64) {
      KILN_CHECK(value == 0.0, "fill: integer tensors fill with zero only");
      KILN_CUDA_CHECK(cudaMemsetAsync(x.data, 0, x.bytes(), stream_));
      return;
    }
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::fill(ptr<T>(x), x.numel(), static_cast<float>(value), stream_);
    });
  }
  void cast(const Tensor& out, const Tensor& x) override {
    dispatch(out, [&](auto to) {
      dispatch(x, [&](auto from) {
        using To = decltype(to);
        using From = decltype(from);
        cuda::cast(ptr<To>(out), ptr<From>(x), x.numel(), stream_);
      });
    });
  }
  void fill_normal(const Tensor& x, const RandomRuns& runs, uint64_t seed, uint64_t stream, double mean,
                   double std) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::fill_normal(ptr<T>(x), runs, seed, stream, mean, std, stream_);
    });
  }
  size_t available_memory() const override {
    size_t free = 0, total = 0;
    KILN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return free;
  }
  size_t reserve(const OpLimits& limits) override {
    const cuda::HeadLayout layout{limits.micro_batch, limits.seq_len, limits.heads.n_head,
                                  limits.heads.n_kv_head, limits.heads.head_dim};
    size_t bytes = 0;
    // Kiln's kernels run every call under kiln and the calls cuDNN does not take under auto.
    if (attention_ != AttentionChoice::Cudnn) {
      KILN_CHECK(cuda::attention_head_dim_supported(layout.head_dim),
                 "the CUDA attention supports head dims 32, 64, 80, 96 and 128, not " +
                     std::to_string(layout.head_dim) + " (model.d_model / model.n_head)");
      bytes = cuda::attention_backward_workspace_bytes(layout);
    }
    if (cudnn_) bytes = std::max(bytes, reserve_cudnn(layout, limits.dtype));
    if (bytes > workspace_bytes_) {
      cudaFree(workspace_);
      workspace_ = allocate(bytes);
      workspace_bytes_ = bytes;
    }
    return workspace_bytes_ + matmul_->workspace_bytes();
  }

  std::string attention() const override { return attention_text_; }

  void synchronize() override { KILN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void matmul(const Tensor& out, const Tensor& a, bool ta, const Tensor& b, bool tb,
              bool accumulate) override {
    const int64_t M = ta ? a.shape.cols() : a.shape.rows();
    const int64_t K = ta ? a.shape.rows() : a.shape.cols();
    const int64_t N = tb ? b.shape.rows() : b.shape.cols();
    matmul_->run(cuda_type(a.dtype), cuda_type(out.dtype), ta, tb, M, N, K, a.data, a.shape.cols(),
                 b.data, b.shape.cols(), out.data, N, accumulate, stream_);
  }
  void add_bias(const Tensor& out, const Tensor& bias) override {
    KILN_CHECK(out.dtype == bias.dtype, "add_bias: mismatch");
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cuda::add_bias(ptr<T>(out), ptr<T>(bias), out.shape.rows(), out.shape.cols(), stream_);
    });
  }
  void add_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cuda::add_columns(ptr<T>(out), ptr<T>(x), out.shape.rows(), out.shape.cols(), x.shape.cols(), first,
                        static_cast<float>(factor), stream_);
    });
  }
  void copy_head_columns(const Tensor& out, const Tensor& x, const HeadColumns& columns) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cuda::copy_head_columns(ptr<T>(out), ptr<T>(x), x.shape.rows(), out.shape.cols(), x.shape.cols(), columns,
                              stream_);
    });
  }
  void take_columns(const Tensor& out, const Tensor& x, int64_t first, double factor) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cuda::take_columns(ptr<T>(out), ptr<T>(x), x.shape.rows(), x.shape.cols(), out.shape.cols(), first,
                         static_cast<float>(factor), stream_);
    });
  }
  void dropout(const Tensor& out, const Tensor& x, const DropoutMask& mask, bool accumulate) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cuda::dropout(ptr<T>(out), ptr<T>(x), x.shape.rows(), x.shape.cols(), mask, accumulate, stream_);
    });
  }
  void bias_backward(const Tensor& dbias, const Tensor& dout) override {
    expect_f32(dbias, "bias_backward: dbias");
    dispatch(dout, [&](auto t) {
      using T = decltype(t);
      cuda::bias_backward(ptr<float>(dbias), ptr<T>(dout), dout.shape.rows(), dout.shape.cols(),
                          stream_);
    });
  }
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override {
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cuda::add(ptr<T>(out), ptr<T>(a), ptr<T>(b), out.numel(), stream_);
    });
  }
  void scale(const Tensor& x, double factor) override {
    expect_f32(x, "scale");
    cuda::scale(ptr<float>(x), x.numel(), static_cast<float>(factor), stream_);
  }
  void sum_squares(const Tensor& sum, const Tensor& x) override {
    expect_f32(x, "sum_squares");
    cuda::sum_squares(ptr<float>(x), x.numel(), static_cast<double*>(sum_partials_), ptr<double>(sum),
                      stream_);
  }

  // One cuBLASLt product each, or the separate ops where it has no kernel for the call or
  // fusing is off.
  void matmul_bias(const Tensor& out, const Tensor& x, const Tensor& weight,
                   const Tensor& bias) override {
    if (!fuse_products_ ||
        !cuda::fused_matmul_bias(*matmul_, out, x, weight, bias, stream_))
      composed_matmul_bias(*this, out, x, weight, bias);
  }
  void matmul_bias_gelu(const Tensor& out, const Tensor& pre, const Tensor& x,
                        const Tensor& weight, const Tensor& bias) override {
    if (!fuse_products_ ||
        !cuda::fused_matmul_bias_gelu(*matmul_, out, pre, x, weight, bias, stream_))
      composed_matmul_bias_gelu(*this, out, pre, x, weight, bias);
  }
  void matmul_bias_grad(const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                        const Tensor& x) override {
    if (!fuse_products_ ||
        !cuda::fused_matmul_bias_grad(*matmul_, dweight, dbias, dy, x, stream_))
      composed_matmul_bias_grad(*this, dweight, dbias, dy, x);
  }
  void matmul_dgelu(const Tensor& dx, const Tensor& dy, const Tensor& weight,
                    const Tensor& pre) override {
    if (!fuse_products_ ||
        !cuda::fused_matmul_dgelu(*matmul_, dx, dy, weight, pre, stream_))
      composed_matmul_dgelu(*this, dx, dy, weight, pre);
  }
  void fuse_products(bool on) override { fuse_products_ = on; }

  void fp8_cast_transpose(const Tensor& codes, const Tensor& codes_t, const Tensor& meta,
                          const Tensor& x) override {
    const Fp8Format format = cast_format(codes, codes_t);
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::fp8_cast_transpose(ptr<uint8_t>(codes), ptr<uint8_t>(codes_t), ptr<float>(meta), ptr<T>(x),
                               x.shape.rows(), x.shape.cols(), format, stream_);
    });
  }
  void fp8_current_scale(const Tensor& meta, const Tensor& x, DType format, int margin) override {
    const Fp8Format f = fp8_format(format, "fp8_current_scale");
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::fp8_current_scale(ptr<float>(meta), ptr<T>(x), x.numel(), f, margin, stream_);
    });
  }
  void fp8_matmul(const Tensor& out, const Tensor& a, const Tensor& a_meta, const Tensor& b, const Tensor& b_meta,
                  bool accumulate) override {
    const std::string why = fp8_unsupported();
    KILN_CHECK(why.empty(), why);
    // Made at the first FP8 product (step 1, before any capture): runs without FP8 keep
    // their memory.
    if (!fp8_matmul_) fp8_matmul_ = std::make_unique<cuda::Fp8Matmul>();
    const auto fp8_type = [](DType d) { return d == DType::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; };
    const float* a_scale_inv = ptr<float>(a_meta) + kFp8ScaleInv;
    const float* b_scale_inv = ptr<float>(b_meta) + kFp8ScaleInv;
    fp8_matmul_->run(fp8_type(a.dtype), fp8_type(b.dtype), cuda_type(out.dtype), a.shape.rows(), b.shape.rows(),
                     a.shape.cols(), a.data, a_scale_inv, b.data, b_scale_inv, out.data, accumulate, stream_);
  }
  std::string fp8_unsupported() const override {
    if (compute_capability_ >= 89) return "";
    return "FP8 products need compute capability 8.9 or newer (Ada or Hopper); " + name_ + " has " +
           std::to_string(compute_capability_ / 10) + "." + std::to_string(compute_capability_ % 10);
  }
  void tune_products(bool on) override { matmul_->tune(on); }
  std::string product_tuning() const override { return matmul_->tuner().summary("cuBLASLt"); }

  void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte,
                         const Tensor& wpe, const Tensor& positions) override {
    const int32_t* position_ids = per_token_values(positions);
    dispatch(out, [&](auto t) {
      using T = decltype(t);
      cuda::embedding_forward(ptr<T>(out), ptr<int32_t>(tokens), position_ids, ptr<T>(wte),
                              wpe.empty() ? nullptr : ptr<T>(wpe), tokens.shape[0],
                              tokens.shape[1], wte.shape.cols(), wte.shape[0], stream_);
    });
  }
  void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& tokens,
                          const Tensor& dout, const Tensor& positions) override {
    expect_f32(dwte, "embedding_backward: dwte");
    const int32_t* position_ids = per_token_values(positions);
    dispatch(dout, [&](auto t) {
      using T = decltype(t);
      cuda::embedding_backward(ptr<float>(dwte), dwpe.empty() ? nullptr : ptr<float>(dwpe),
                               ptr<int32_t>(tokens), position_ids, ptr<T>(dout), tokens.shape[0],
                               tokens.shape[1], dwte.shape.cols(), dwte.shape[0],
                               dwpe.empty() ? 0 : dwpe.shape[0], stream_);
    });
  }

  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                         const Tensor& x, const Tensor& weight, const Tensor& bias,
                         double eps) override {
    expect_f32(rstd, "layernorm_forward: rstd");
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::layernorm_forward(ptr<T>(out), ptr<float>(mean), ptr<float>(rstd), ptr<T>(x),
                              ptr<T>(weight), ptr<T>(bias), x.shape.rows(), x.shape.cols(),
                              static_cast<float>(eps), stream_);
    });
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                          const Tensor& dout, const Tensor& x, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd) override {
    expect_f32(dweight, "layernorm_backward: dweight");
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::layernorm_backward(ptr<T>(dx), ptr<float>(dweight), ptr<float>(dbias), ptr<T>(dout),
                               ptr<T>(x), ptr<T>(weight), ptr<float>(mean), ptr<float>(rstd),
                               x.shape.rows(), x.shape.cols(), stream_);
    });
  }
  void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, double eps) override {
    expect_f32(rstd, "rmsnorm_forward: rstd");
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::rmsnorm_forward(ptr<T>(out), ptr<float>(rstd), ptr<T>(x), ptr<T>(weight),
                            x.shape.rows(), x.shape.cols(), static_cast<float>(eps), stream_);
    });
  }
  void rmsnorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout,
                        const Tensor& x, const Tensor& weight, const Tensor& rstd) override {
    expect_f32(dweight, "rmsnorm_backward: dweight");
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::rmsnorm_backward(ptr<T>(dx), ptr<float>(dweight), ptr<T>(dout), ptr<T>(x),
                             ptr<T>(weight), ptr<float>(rstd), x.shape.rows(), x.shape.cols(),
                             stream_);
    });
  }

  void gelu_forward(const Tensor& out, const Tensor& x) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::gelu_forward(ptr<T>(out), ptr<T>(x), x.numel(), stream_);
    });
  }
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::gelu_backward(ptr<T>(dx), ptr<T>(x), ptr<T>(dout), x.numel(), stream_);
    });
  }
  void route_tokens(const Tensor& choice, const Tensor& gate, const Tensor& stats, const Tensor& logits,
                    const Tensor& bias, const ExpertRoute& route) override {
    check_routed_experts(route, "route_tokens");
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cuda::route_tokens(ptr<int32_t>(choice), ptr<float>(gate), ptr<float>(stats), ptr<T>(logits), ptr<float>(bias),
                         logits.shape.rows(), route, route_scratch_, stream_);
    });
  }
  void route_rows(const Tensor& row, const Tensor& source, const Tensor& row_gate, const Tensor& offsets,
                  const Tensor& counts, const Tensor& choice, const Tensor& gate, const ExpertRoute& route) override {
    check_routed_experts(route, "route_rows");
    cuda::route_rows(ptr<int32_t>(row), ptr<int32_t>(source), ptr<float>(row_gate), ptr<int32_t>(offsets),
                     ptr<float>(counts), ptr<int32_t>(choice), ptr<float>(gate), choice.numel() / route.top_k, route,
                     route_scratch_, stream_);
  }
  void route_backward(const Tensor& d_logits, const Tensor& tally, const Tensor& d_gate, const Tensor& logits,
                      const Tensor& choice, const Tensor& stats, const Tensor& shares, const ExpertRoute& route,
                      const RouteLoss& loss) override {
    check_routed_experts(route, "route_backward");
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cuda::route_backward(ptr<T>(d_logits), tally.empty() ? nullptr : ptr<float>(tally), ptr<float>(d_gate),
                           ptr<T>(logits), ptr<int32_t>(choice), ptr<float>(stats), ptr<float>(shares),
                           logits.shape.rows(), route, loss, stream_);
    });
  }
  void gather_rows(const Tensor& out, const Tensor& x, const Tensor& rows,
                   const Tensor& weights) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::gather_rows(ptr<T>(out), ptr<T>(x), ptr<int32_t>(rows),
                        weights.empty() ? nullptr : ptr<float>(weights), out.shape.rows(),
                        out.shape.cols(), stream_);
    });
  }
  void combine_rows(const Tensor& out, const Tensor& x, const Tensor& rows, const Tensor& weights,
                    bool accumulate) override {
    const int64_t k = out.shape.rows() > 0 ? rows.numel() / out.shape.rows() : 1;
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::combine_rows(ptr<T>(out), ptr<T>(x), ptr<int32_t>(rows),
                         weights.empty() ? nullptr : ptr<float>(weights), out.shape.rows(), k,
                         out.shape.cols(), accumulate, stream_);
    });
  }
  void row_dots(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& rows) override {
    const int64_t k = a.shape.rows() > 0 ? rows.numel() / a.shape.rows() : 1;
    dispatch(a, [&](auto t) {
      using T = decltype(t);
      cuda::row_dots(ptr<float>(out), ptr<T>(a), ptr<T>(b), ptr<int32_t>(rows), a.shape.rows(), k,
                     a.shape.cols(), stream_);
    });
  }
  // One grouped GEMM, an expert's rows a product (kernels/cuda/grouped_gemm.h); the products
  // one by one where it does not apply.
  void expert_matmul(const Tensor& out, const Tensor& x, const Tensor& w, bool transpose_w,
                     const std::vector<int64_t>& offsets) override {
    const int64_t W = w.shape.rows() / static_cast<int64_t>(offsets.size() - 1), D = w.shape.cols();
    std::vector<cuda::GroupedProduct> products;
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
      products.push_back({x.slice(begin, end).data, expert_rows(w, e, W).data, out.slice(begin, end).data, end - begin,
                          out.shape.cols(), x.shape.cols(), x.shape.cols(), D, out.shape.cols()});
    });
    if (!grouped_->run(cuda_type(x.dtype), cuda_type(out.dtype), false, transpose_w, products, false, stream_,
                       matmul_->product_workspace(), matmul_->product_workspace_bytes()))
      expert_matmul_by_expert(*this, out, x, w, transpose_w, offsets);
  }
  void expert_weight_grad(const Tensor& dw, const Tensor& dy, const Tensor& x,
                          const std::vector<int64_t>& offsets) override {
    const int64_t W = dw.shape.rows() / static_cast<int64_t>(offsets.size() - 1), D = dw.shape.cols();
    std::vector<cuda::GroupedProduct> products;
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
      products.push_back({dy.slice(begin, end).data, x.slice(begin, end).data, expert_rows(dw, e, W).data, W, D,
                          end - begin, W, D, D});
    });
    if (!grouped_->run(cuda_type(x.dtype), cuda_type(dw.dtype), true, false, products, true, stream_,
                       matmul_->product_workspace(), matmul_->product_workspace_bytes()))
      expert_weight_grad_by_expert(*this, dw, dy, x, offsets);
  }
  void swiglu_forward(const Tensor& out, const Tensor& x) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::swiglu_forward(ptr<T>(out), ptr<T>(x), out.shape.rows(), out.shape.cols(), stream_);
    });
  }
  void swiglu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) override {
    dispatch(x, [&](auto t) {
      using T = decltype(t);
      cuda::swiglu_backward(ptr<T>(dx), ptr<T>(x), ptr<T>(dout), dout.shape.rows(),
                            dout.shape.cols(), stream_);
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
    const cuda::HeadLayout layout = head_layout(qkv, s);
    expect_f32(lse, "attention_forward: lse");
    const int32_t* starts = per_token_values(key_starts);
    if (use_cudnn(layout, qkv.dtype, starts != nullptr, {out.data, lse.data, qkv.data})) {
      cudnn_->forward(out.data, ptr<float>(lse), qkv.data, layout, qkv.dtype, workspace_);
      return;
    }
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cuda::attention_forward(ptr<T>(out), ptr<float>(lse), ptr<T>(qkv), starts, layout,
                              stream_);
    });
  }
  void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                          const Tensor& out, const Tensor& lse, AttentionShape s,
                          const Tensor& key_starts) override {
    const cuda::HeadLayout layout = head_layout(qkv, s);
    const int32_t* starts = per_token_values(key_starts);
    if (use_cudnn(layout, qkv.dtype, starts != nullptr,
                  {dqkv.data, dout.data, qkv.data, out.data, lse.data})) {
      cudnn_->backward(dqkv.data, dout.data, qkv.data, out.data, ptr<float>(lse), layout,
                       qkv.dtype, workspace_);
      return;
    }
    KILN_CHECK(cuda::attention_backward_workspace_bytes(layout) <= workspace_bytes_,
               "attention_backward: reserve() was not called for this shape");
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cuda::attention_backward(ptr<T>(dqkv), ptr<T>(dout), ptr<T>(qkv), ptr<T>(out),
                               ptr<float>(lse), starts, layout, workspace_, stream_);
    });
  }
  void ring_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, const Tensor& kv,
                              const Tensor& q_index, const Tensor& k_index, AttentionShape s,
                              const Tensor& key_starts) override {
    const cuda::HeadLayout layout = ring_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cuda::ring_attention_forward(ptr<T>(out), ptr<float>(lse), ptr<T>(qkv), ptr<T>(kv), ptr<int32_t>(q_index),
                                   ptr<int32_t>(k_index), per_token_values(key_starts), layout, kv.shape[1],
                                   stream_);
    });
  }
  void ring_attention_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                               const Tensor& kv, const Tensor& out, const Tensor& lse, const Tensor& q_index,
                               const Tensor& k_index, AttentionShape s, const Tensor& key_starts) override {
    const cuda::HeadLayout layout = ring_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cuda::ring_attention_backward(ptr<T>(dqkv), ptr<T>(dkv), ptr<T>(dout), ptr<T>(qkv), ptr<T>(kv), ptr<T>(out),
                                    ptr<float>(lse), ptr<int32_t>(q_index), ptr<int32_t>(k_index),
                                    per_token_values(key_starts), layout, kv.shape[1], stream_);
    });
  }
  void split_kv(const Tensor& kv, const Tensor& qkv, AttentionShape s) override {
    const cuda::HeadLayout layout = head_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cuda::split_kv(ptr<T>(kv), ptr<T>(qkv), layout, stream_);
    });
  }
  void add_kv_gradient(const Tensor& dqkv, const Tensor& dkv, AttentionShape s) override {
    const cuda::HeadLayout layout = head_layout(dqkv, s);
    dispatch(dqkv, [&](auto t) {
      using T = decltype(t);
      cuda::add_kv_gradient(ptr<T>(dqkv), ptr<T>(dkv), layout, stream_);
    });
  }
  void attention_decode(const Tensor& out, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& qkv, int64_t pos, AttentionShape s) override {
    const cuda::HeadLayout layout = head_layout(qkv, s);
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cuda::attention_decode(ptr<T>(out), ptr<T>(k_cache), ptr<T>(v_cache), ptr<T>(qkv), layout,
                             k_cache.shape[1], pos, stream_);
    });
  }

  void cross_entropy_forward(const Tensor& losses, const Tensor& lse, const Tensor& logits,
                             const Tensor& targets, int64_t vocab_size) override {
    expect_f32(losses, "cross_entropy_forward: losses");
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cuda::cross_entropy_forward(ptr<float>(losses), ptr<float>(lse), ptr<T>(logits),
                                  ptr<int32_t>(targets), logits.shape.rows(), logits.shape.cols(),
                                  vocab_size, stream_);
    });
  }
  void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                              const Tensor& targets, int64_t vocab_size, double dloss) override {
    dispatch(logits, [&](auto t) {
      using T = decltype(t);
      cuda::cross_entropy_backward(ptr<T>(dlogits), ptr<T>(logits), ptr<float>(lse),
                                   ptr<int32_t>(targets), logits.shape.rows(), logits.shape.cols(),
                                   vocab_size, static_cast<float>(dloss), stream_);
    });
  }

  void adamw(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
             const Tensor& param_copy, const Tensor& segments, const AdamWStep& s) override {
    for (const Tensor* t : {&master, &grad, &m, &v}) expect_f32(*t, "adamw state");
    const auto* table = static_cast<const cuda::AdamWSegment*>(segments.data);
    const int n = static_cast<int>(segments.shape[0]);
    const double* scalars = s.scalars.empty() ? nullptr : ptr<double>(s.scalars);
    // With scalars the kernel reads the terms from them; the host's are not computed.
    KILN_CHECK(scalars || s.step >= 1, "adamw: step is 1-based");
    const AdamWTerms terms = scalars ? AdamWTerms{} : adamw_terms(s.lr, s.beta1, s.beta2, s.weight_decay, s.step);
    auto run = [&](auto t) {
      using T = decltype(t);
      cuda::adamw(ptr<float>(master), ptr<float>(grad), ptr<float>(m), ptr<float>(v),
                  param_copy.empty() ? static_cast<T*>(nullptr) : ptr<T>(param_copy), table, n,
                  static_cast<float>(s.beta1), static_cast<float>(s.beta2), static_cast<float>(s.eps),
                  terms, static_cast<float>(s.grad_scale), scalars, stream_);
    };
    if (param_copy.empty()) {
      run(float{});
    } else {
      dispatch(param_copy, run);
    }
  }
  void clip_factor(const Tensor& scalars) override {
    cuda::clip_factor(ptr<double>(scalars), stream_);
  }

  std::unique_ptr<OpGraph> capture(const std::function<void()>& queue, std::string& why) override {
    // Thread-local mode: a call of this thread that is unsafe while capturing (an
    // allocation, a wait for the device) fails the capture instead of running.
    KILN_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    std::string failure;
    try {
      queue();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (failure.empty() && ended != cudaSuccess)
      failure = std::string("the capture failed: ") + cudaGetErrorString(ended);
    cudaGetLastError();  // a failed capture's error is not the next op's
    cudaGraphExec_t exec = nullptr;
    if (failure.empty()) {
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      if (made != cudaSuccess) failure = std::string("instantiating the graph failed: ") + cudaGetErrorString(made);
    }
    if (graph) cudaGraphDestroy(graph);
    if (!failure.empty()) {
      why = failure;
      return nullptr;
    }
    return std::make_unique<CudaGraph>(exec, stream_);
  }

 private:
  static void check_routed_experts(const ExpertRoute& route, const char* op) {
    KILN_CHECK(route.experts <= cuda::kMostRoutedExperts,
               std::string(op) + ": the CUDA router takes at most " + std::to_string(cuda::kMostRoutedExperts) +
                   " experts, not " + std::to_string(route.experts));
  }
  void rope(const Tensor& qkv, const Tensor& table, AttentionShape s, const Tensor& positions,
            bool inverse) {
    dispatch(qkv, [&](auto t) {
      using T = decltype(t);
      cuda::rope(ptr<T>(qkv), ptr<float>(table), per_token_values(positions), head_layout(qkv, s), inverse,
                 stream_);
    });
  }
  CudnnAttentionCase cudnn_case(const cuda::HeadLayout& layout, DType dtype,
                                bool key_starts) const {
    CudnnAttentionCase c;
    c.dtype = dtype;
    c.seq = layout.seq;
    c.n_head = layout.n_head;
    c.n_kv_head = layout.n_kv_head;
    c.head_dim = layout.head_dim;
    c.key_starts = key_starts;
    c.compute_capability = compute_capability_;
    c.cudnn_version = cudnn_->version();
    return c;
  }
  // Plans cuDNN's attention at the run's largest shape and returns the workspace it needs
  // (0 where kiln's kernels will run); backend.attention=cudnn refuses a shape cuDNN lacks.
  size_t reserve_cudnn(const cuda::HeadLayout& layout, DType dtype) {
    const std::string version = "cuDNN " + cudnn_version_text(cudnn_->version());
    std::string why = cudnn_attention_unsupported(cudnn_case(layout, dtype, false));
    std::optional<size_t> bytes;
    if (why.empty()) {
      bytes = cudnn_->prepare(layout, dtype, why);
      if (!bytes) why = "this shape (" + why + ")";
    }
    const std::string lacks = version + "'s fused attention does not support " + why;
    KILN_CHECK(bytes || attention_ == AttentionChoice::Auto,
               "backend.attention=cudnn: " + lacks + "; use backend.attention=auto or kiln");
    attention_text_ = bytes ? version + " fused flash attention" : "kiln's kernels (" + lacks + ")";
    return bytes.value_or(0);
  }
  // Whether cuDNN computes this attention call: under auto, every call it supports whose plan
  // fits the workspace reserve() made; under cudnn, every call, or a clear error.
  bool use_cudnn(const cuda::HeadLayout& layout, DType dtype, bool key_starts,
                 std::initializer_list<const void*> pointers) {
    if (!cudnn_) return false;
    std::string why = cudnn_attention_unsupported(cudnn_case(layout, dtype, key_starts));
    if (why.empty() && !aligned16(pointers)) why = "tensors that are not 16-byte aligned";
    if (why.empty()) {
      const std::optional<size_t> bytes = cudnn_->prepare(layout, dtype, why);
      if (bytes) {
        if (*bytes <= workspace_bytes_) return true;
        KILN_CHECK(attention_ == AttentionChoice::Auto,
                   "attention: reserve() was not called for this shape");
        return false;
      }
      why = "this shape (" + why + ")";
    }
    KILN_CHECK(attention_ == AttentionChoice::Auto,
               "backend.attention=cudnn: cuDNN's fused attention does not support " + why);
    return false;
  }

  int device_;
  std::string name_;
  AttentionChoice attention_;
  int compute_capability_ = 0;
  std::unique_ptr<cuda::CudnnAttention> cudnn_;  // null unless cuDNN loaded
  std::string attention_text_ = "kiln's kernels";
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::Matmul> matmul_;
  std::unique_ptr<cuda::GroupedGemm> grouped_;  // the experts' products
  std::unique_ptr<cuda::Fp8Matmul> fp8_matmul_;  // made at the first FP8 product
  void* sum_partials_ = nullptr;  // sum_squares' (calls on stream_ take turns)
  void* route_scratch_ = nullptr;  // the routing ops' (calls on stream_ take turns)
  bool fuse_products_ = true;  // Ops::fuse_products
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace

int cuda_device_count() {
  int count = 0;
  // No driver, no device, or a driver too old for this runtime all mean: no GPU here.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::unique_ptr<Ops> make_cuda_ops(int device, AttentionChoice attention) {
  return std::make_unique<CheckedOps>(std::make_unique<CudaOps>(device, attention));
}

std::string cuda_pci_bus_id(int device) {
  char id[32] = {};
  KILN_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, device));
  return id;
}

}  // namespace kiln
