// The optimizer's per-step scalars, kept in the backend's memory so that a training step
// captured once (CUDA graphs, docs/gpu.md#cuda-graphs) reads each step's values when it is
// replayed: the host writes the learning-rate terms, the loss scale and the clip threshold
// into page-locked memory and the step copies them in; sum_squares adds up the squared
// gradient norm; clip_factor turns it into the factor AdamW reads each gradient with, and
// into the skip of a step whose gradients are not finite. The host reads the norm and the
// skip back after the step.
//
// The arithmetic on these values is written once here, for the CPU twin and the CUDA kernel
// alike, so the two backends and the eager and replayed steps compute the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace kiln {

// Indices into the F64 scalars tensor of kOptimizerScalars values.
enum OptimizerScalar : int64_t {
  // Written by the host before each step (adamw_terms, the loss scaler, train.clip_grad).
  kLossScale,
  kClipGrad,       // 0: no clipping
  kStepSize,       // lr / (1 - beta1^step)
  kRootCorrection2,  // sqrt(1 - beta2^step)
  kDecay,          // 1 - lr * weight_decay, for the segments that decay
  // Zero from the host, then summed into by sum_squares: the squared gradient norm of the
  // dense parameters and of the experts' (which the ranks of an expert group sum apart).
  kDenseSumSquares,
  kExpertSumSquares,
  // Written by clip_factor.
  kGradNorm,   // of the true (unscaled) gradients, before clipping
  kGradScale,  // each gradient's factor: 1 / loss scale, times the clip
  kSkip,       // 1: the gradients are not finite, AdamW leaves everything unchanged
  kOptimizerScalars
};

// The learning-rate terms of AdamW's step `step` (1-based), in double, as torch.optim.AdamW
// computes them. Defined in kernels/ (compiled as the CPU body always was), for the host.
struct AdamWTerms {
  double step_size = 0;         // lr / (1 - beta1^step)
  double root_correction2 = 0;  // sqrt(1 - beta2^step)
  double decay = 1;             // 1 - lr * weight_decay
};
AdamWTerms adamw_terms(double lr, double beta1, double beta2, double weight_decay, int64_t step);

// PyTorch's clip_grad_norm_ rule, its epsilon included, on scalars s: the norm of the true
// gradients (the squared norm itself when it is not finite: such a step is skipped and
// reports it), the factor each gradient is read with, and the skip.
KILN_HOST_DEVICE inline void clip_rule(double* s) {
  using std::isfinite;
  using std::sqrt;
  const double sum = s[kDenseSumSquares] + s[kExpertSumSquares];
  const double loss_scale = s[kLossScale], clip_grad = s[kClipGrad];
  const bool finite = isfinite(sum);
  const double norm = finite ? sqrt(sum) / loss_scale : sum;
  double factor = 1.0 / loss_scale;
  const double clip = clip_grad / (norm + 1e-6);
  if (clip_grad > 0 && clip < 1.0) factor *= clip;
  s[kGradNorm] = norm;
  s[kGradScale] = factor;
  s[kSkip] = finite ? 0.0 : 1.0;
}

}  // namespace kiln
