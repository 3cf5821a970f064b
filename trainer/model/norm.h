// The pre-norm of a block: LayerNorm (GPT-2) or RMSNorm (Llama), chosen by model.arch, over
// this rank's token share; or RMSNorm over a latent of every token (latent attention's). It
// saves its statistics per activation slot for backward.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/layer_build.h"

namespace kiln {

class Norm {
 public:
  void bind(const LayerBuild& build, const std::string& name);
  // RMSNorm over `width` values of every token of the micro-batch, its weight's gradient
  // summed over `group` (null: none): latent attention's, whose tensor ranks each pass back
  // their own heads' part of the gradient.
  void bind_latent(const LayerBuild& build, const std::string& name, int64_t width, Communicator* group);
  void forward(Ops& ops, const Batch& batch, const Tensor& out, const Tensor& x) const;
  // dx += the input gradient; weight (and bias) gradients accumulate, or with
  // batch.defer_weights wait for backward_weights, from copies of dout, x and the statistics
  // kept in the slot (the slot's own may be recomputed for other blocks in between).
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dout,
                const Tensor& x) const;
  void backward_weights(Ops& ops, const Batch& batch) const;

 private:
  // The op: dx += the input gradient unless dx is empty, the weights' gradients unless
  // dweight is empty (a frozen norm's, or an input-gradient pass').
  void run_backward(Ops& ops, const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                    const Tensor& x, const Tensor& mean, const Tensor& rstd) const;
  // The op with the weights' gradients (none when frozen), summed over the
  // sequence-parallel group.
  void gradients(Ops& ops, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                 const Tensor& rstd) const;

  // The statistics and the copies, per slot, for rows of `width` values.
  void take_buffers(const LayerBuild& build, int64_t width);
  // The micro-batch's rows of a buffer: its token share, or all its tokens (a latent norm).
  Tensor rows(const Batch& batch, const Tensor& t) const { return latent_ ? batch.of(t) : batch.share_of(t); }

  bool rms_ = false;
  bool latent_ = false;
  double eps_ = 1e-5;
  Parameter weight_;
  Parameter bias_;
  // The group its weights' gradients are summed over: the sequence-parallel group (each rank
  // saw its own tokens), or a latent norm's tensor group; null when alone.
  Communicator* shared_over_ = nullptr;
  std::vector<Tensor> mean_;  // per slot, [micro_batch, seq_len] (LayerNorm only)
  std::vector<Tensor> rstd_;  // per slot
  // A split backward's copies, per slot (LayerBuild::weight_inputs): mean empty for RMSNorm.
  struct Kept {
    Tensor x, dout, mean, rstd;
  };
  std::vector<Kept> kept_;
};

}  // namespace kiln
