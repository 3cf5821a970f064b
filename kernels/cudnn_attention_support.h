// Whether cuDNN's fused flash attention (kernels/cuda/cudnn_attention.h) can compute an
// attention call, decided on the host from what is known before any GPU work: header-only
// and free of CUDA, so that CI tests it on machines without a GPU or cuDNN.
//
// The rules are NVIDIA's published support surface for cuDNN 9's scaled-dot-product
// attention with bf16/fp16 inputs (the cuDNN frontend's Attention page, cuDNN 9.18):
// Ampere or newer; head dims a multiple of 8, up to 128 (256 on Hopper, whose backward
// kernels take it; Ampere's and Blackwell's backward stop at 128). Releases up to 9.15.0 also
// need the sequence length to be a multiple of 128 unless a padding mask is passed, which
// kiln's graphs do not.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tensor.h"

namespace kiln {

struct CudnnAttentionCase {
  DType dtype = DType::BF16;
  int64_t seq = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  bool key_starts = false;     // Megatron's document resets (ops.h); cuDNN's graphs here have none
  int compute_capability = 0;  // 90 for sm_90
  int cudnn_version = 0;       // cudnnGetVersion(): 91900 for 9.19.0
};

// "9.19.0" from cudnnGetVersion()'s 91900 (and "8.9.7" from cuDNN 8's 8907).
inline std::string cudnn_version_text(int version) {
  // cuDNN 9 numbers its releases major * 10000 + minor * 100 + patch, cuDNN 8 major * 1000 +
  // minor * 100 + patch.
  const int major = version >= 90000 ? version / 10000 : version / 1000;
  const int minor = version >= 90000 ? version / 100 % 100 : version / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(version % 100);
}

// Empty when cuDNN computes the case; otherwise what rules it out, as a phrase that reads
// after "cuDNN's fused attention does not support " (e.g. "head dim 96 on sm_80 ...").
inline std::string cudnn_attention_unsupported(const CudnnAttentionCase& c) {
  if (c.cudnn_version < 90000 || c.cudnn_version >= 100000)
    return "cuDNN " + cudnn_version_text(c.cudnn_version) + " (kiln's graphs are written for cuDNN 9)";
  if (c.compute_capability < 80)
    return "sm_" + std::to_string(c.compute_capability) + " (Ampere, sm_80, or newer needed)";
  if (c.dtype != DType::BF16 && c.dtype != DType::F16)
    return std::string(dtype_name(c.dtype)) + " tensors (bf16 or fp16 needed)";
  if (c.key_starts) return "document resets (data.reset_attention_mask)";
  if (c.n_kv_head <= 0 || c.n_head % c.n_kv_head != 0)
    return std::to_string(c.n_head) + " query heads over " + std::to_string(c.n_kv_head) +
           " key/value heads";
  const int64_t max_head_dim = c.compute_capability == 90 ? 256 : 128;
  if (c.head_dim <= 0 || c.head_dim % 8 != 0 || c.head_dim > max_head_dim)
    return "head dim " + std::to_string(c.head_dim) + " on sm_" +
           std::to_string(c.compute_capability) + " (a multiple of 8 up to " +
           std::to_string(max_head_dim) + " needed)";
  if (c.cudnn_version <= 91500 && c.seq % 128 != 0)
    return "sequence length " + std::to_string(c.seq) + " with cuDNN " +
           cudnn_version_text(c.cudnn_version) +
           " (a multiple of 128 needed up to cuDNN 9.15.0)";
  return {};
}

}  // namespace kiln
