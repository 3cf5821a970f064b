// Causal grouped-query attention through cuDNN's fused flash attention (scaled dot-product
// attention), forward and backward, behind Ops::attention_forward/backward when
// backend.attention picks it (kernels/cuda/cuda_ops.cu). The graphs read q, k and v as
// strided views of kiln's fused qkv [B, T, (H + 2 Hkv) D] and write the gradients into dqkv
// the same way, so nothing is copied; cuDNN's softmax statistics are kiln's lse [B, H, T]
// (the natural-log log-sum-exp of the scaled scores), so forward and backward of either
// implementation pair up.
//
// cuDNN is loaded at run time (kernels/cuda/cudnn_library.h); a build without its headers
// compiles kernels/cuda/cudnn_absent.cu instead, whose open() always says why not.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/kernels.cuh"
#include "kernels/tensor.h"

namespace kiln::cuda {

class CudnnAttention {
 public:
  // cuDNN with a handle on `stream` (of the current device), or null with the reason in `why`.
  static std::unique_ptr<CudnnAttention> open(cudaStream_t stream, std::string& why);
  virtual ~CudnnAttention() = default;

  // cudnnGetVersion(): 91900 for 9.19.0.
  virtual int version() const = 0;
  // Builds the forward and backward plans of a shape once (later calls find them in a bounded
  // cache) and returns the workspace bytes the larger needs; nullopt, with cuDNN's reason in
  // `why`, when no engine takes the graphs. dtype is BF16 or F16.
  virtual std::optional<size_t> prepare(const HeadLayout& layout, DType dtype, std::string& why) = 0;
  // Ops::attention_forward and attention_backward without key_starts, on a prepared shape;
  // `workspace` holds prepare()'s bytes. Every pointer is 16-byte aligned.
  virtual void forward(void* out, float* lse, const void* qkv, const HeadLayout& layout,
                       DType dtype, void* workspace) = 0;
  virtual void backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                        const float* lse, const HeadLayout& layout, DType dtype,
                        void* workspace) = 0;
};

}  // namespace kiln::cuda
