// Parameters and their gradients live in two flat buffers with the same layout, in the
// order backward produces gradients (output layer first, embeddings last), so later
// data-parallel buckets are slices and an optimizer shard is one contiguous range.
#pragma once

#include <string>
#include <vector>

#include "trainer/memory/arena.h"

namespace kiln {

enum class Init { Normal, Zeros, Ones };

struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;  // same offset in the gradient buffer
  Init init = Init::Zeros;
  double std = 0;        // for Init::Normal
  bool decay = false;    // weight decay: matrices and embeddings, not norms or biases
  int64_t real_rows = 0; // rows past this are vocabulary padding: zero and never trained
};

class ParameterSet {
 public:
  explicit ParameterSet(DType dtype) : dtype_(dtype) {}

  Parameter add(const std::string& name, Shape shape, Init init, double std = 0,
                int64_t real_rows = -1);
  // Starts a layout pass (the set is carved twice, as arenas are).
  void begin_pass() { params_.clear(); }
  void allocate(Ops& ops);
  void check_complete() const;

  const std::vector<Parameter>& all() const { return params_; }
  const Parameter& find(const std::string& name) const;
  // The whole flat buffers, padding included (padding is zero and stays zero).
  Tensor flat_values() const { return flat(first_value_, values_); }
  Tensor flat_grads() const { return flat(first_grad_, grads_); }
  // Trainable elements, padding excluded.
  int64_t count() const;
  DType dtype() const { return dtype_; }
  const Arena& values_arena() const { return values_; }
  const Arena& grads_arena() const { return grads_; }

 private:
  Tensor flat(Tensor first, const Arena& arena) const;

  DType dtype_;
  Arena values_{"parameters"};
  Arena grads_{"gradients"};
  std::vector<Parameter> params_;
  Tensor first_value_, first_grad_;
};

}  // namespace kiln
