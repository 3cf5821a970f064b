// Dynamic loss scaling for fp16: the loss is multiplied by the scale before backward so
// small gradients survive fp16; a step whose gradients overflow is skipped and the scale
// halved; after growth_interval clean steps the scale doubles again. bf16 and fp32 need
// none: their scale stays 1.
#pragma once

#include <cstdint>

namespace kiln {

class LossScaler {
 public:
  static LossScaler dynamic(double initial = 65536.0, int64_t growth_interval = 1000);
  static LossScaler none() { return LossScaler(1.0, 0); }

  double scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }
  // After each optimizer step: overflow = the step was skipped.
  void update(bool overflow);

  // What a checkpoint keeps, so a resumed fp16 run scales exactly as the original would.
  struct State {
    double scale = 1;
    int64_t clean_steps = 0;
    int64_t skipped = 0;
  };
  State state() const { return {scale_, clean_steps_, skipped_}; }
  void restore(const State& state) {
    scale_ = state.scale;
    clean_steps_ = state.clean_steps;
    skipped_ = state.skipped;
  }

 private:
  LossScaler(double scale, int64_t growth_interval)
      : scale_(scale), growth_interval_(growth_interval) {}

  double scale_;
  int64_t growth_interval_;  // 0: static
  int64_t clean_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace kiln
