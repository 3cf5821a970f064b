// What the two CUDA attentions share: the sizes every kernel takes, and the tensor-core
// path (kernels/cuda/attention_tensor_core.cu) that kernels/cuda/attention.cu hands 16-bit
// attention to when it applies.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {

// The sizes every attention kernel needs, as plain values (a kernel argument).
struct AttentionDims {
  int seq = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int group = 0;          // n_head / n_kv_head: query heads per kv head
  int64_t width = 0;      // elements per token in qkv
  int64_t out_width = 0;  // elements per token in out: n_head * D
};

// Checks the layout (kiln::Error naming `op` when it is bad) and returns its sizes.
AttentionDims attention_dims(const HeadLayout& layout, const char* op);

// The softmax scale 1 / sqrt(D), and the same times log2(e) for exp2.
inline float attention_scale(int64_t head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}
inline float attention_scale_log2(int64_t head_dim) {
  return static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(head_dim)));
}

// Opts the kernel into `bytes` of dynamic shared memory (beyond the 48 KB default). Cheap;
// done on every launch so it holds on whichever device is current.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
  KILN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

// True when the tensor-core kernels take this attention of 16-bit T (bf16 or fp16): a head
// dim of 64 or 128, and every tensor it reads or writes 16-byte aligned (rows are then
// aligned too: a head's row is a multiple of 8 elements).
template <typename T>
bool tensor_core_attention_applies(const HeadLayout& layout,
                                   std::initializer_list<const void*> tensors);

// The same contracts as attention_forward / attention_backward in kernels.cuh; delta is
// sum(dout * out) per row, [B, n_head, T], already computed.
template <typename T>
void attention_forward_tensor_core(T* out, float* lse, const T* qkv, const int32_t* key_starts,
                                   const HeadLayout& layout, cudaStream_t stream);
template <typename T>
void attention_backward_tensor_core(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                    const float* delta, const int32_t* key_starts,
                                    const HeadLayout& layout, cudaStream_t stream);

}  // namespace kiln::cuda
