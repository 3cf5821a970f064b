// Choosing each matrix product's algorithm by timing, once per distinct product.
//
// A library such as cuBLASLt offers several algorithms for a product, its heuristic's best
// guess first; the guess need not be the fastest at a given shape (on an H100, gpt2-124m's
// 16384x768x768 products ran at 242-263 TFLOP/s with it, its logits product at 814:
// bench/results/2026-11-23T0813Z-nvidia-h100-80gb-hbm3-profile-gpt2-124m-after.md). So while
// tuning is on (Ops::tune_products: the trainer's first step), the first call of each distinct
// product times its first kCandidates candidates and keeps the fastest; its plan caches the
// choice for the rest of the run. The timing itself is the backend's
// (kernels/cuda/matmul_tuning.cu); this file is the logic around it, tested on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

// Everything a product's plan and its chosen algorithm depend on. Types and the epilogue are
// the backend's codes (cudaDataType, kiln::cuda::Epilogue); alignments are in bytes (the
// largest power of two, up to 256, dividing the address: a kernel may need more than the
// element size); the bias and aux alignments and aux_ld are 0 for a product without them.
struct ProductKey {
  int device = 0;
  int a_b_type = 0;
  int c_type = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  int epilogue = 0;
  int64_t aux_ld = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0, align_aux = 0;
  bool operator==(const ProductKey&) const = default;
};

struct ProductKeyHash {
  size_t operator()(const ProductKey& key) const;
};

// The index of the fastest candidate: seconds[i] is candidate i's time, negative or not
// finite where it could not run. -1 when none ran.
int fastest_candidate(const std::vector<double>& seconds);

class ProductTuner {
 public:
  // How many of the heuristic's candidates are timed: its first eight.
  static constexpr int kCandidates = 8;
  // The seconds one run of candidate i takes, or a negative value when it cannot run.
  using Measure = std::function<double(int candidate)>;
  // Seconds on a steady clock: the tuning's wall time.
  using Clock = std::function<double()>;

  explicit ProductTuner(Clock clock = steady_seconds);

  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }

  // The candidate a new product runs, of the `candidates` its library offers: the first
  // (the heuristic's guess) when tuning is off or there is no other, else the fastest that
  // `measure` finds (the first again when none ran), and the product counts as tuned.
  int choose(int candidates, const Measure& measure);
  // A product whose fused epilogue the library has no kernel for: it runs as separate ops.
  void count_unfused() { ++unfused_; }

  int tuned() const { return tuned_; }
  int unfused() const { return unfused_; }
  double seconds() const { return seconds_; }
  // For the banner's line on matrix products, e.g. "14 shapes tuned in 0.62 s (each the
  // fastest of up to 8 cuBLASLt candidates)"; "" when nothing was tuned and nothing ran
  // unfused.
  std::string summary(const std::string& library) const;

  static double steady_seconds();

 private:
  Clock clock_;
  bool enabled_ = false;
  int tuned_ = 0;
  int unfused_ = 0;
  double seconds_ = 0;
};

}  // namespace kiln
