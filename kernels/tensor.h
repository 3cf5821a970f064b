// A tensor is a view: a pointer, a dtype, a shape and a device. It owns nothing;
// memory comes from arenas sized once at start-up (trainer/memory/arena.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace kiln {

enum class DType : uint8_t {
  F32,   // master weights, gradients, optimizer state, statistics; everything on the CPU
  F64,   // the CPU backend computes in double for gradient checks
  I32,   // token ids and targets
  I64,   // offsets (the optimizer's table of parameter segments)
  BF16,  // parameters and activations in bf16 mixed precision (CUDA)
  F16,   // parameters and activations in fp16 mixed precision (CUDA)
  E4M3,  // FP8 codes of weights and activations (precision.dtype=fp8), one byte each
  E5M2,  // FP8 codes of gradients (precision.dtype=fp8)
};

enum class Device : uint8_t { Cpu, Cuda };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> list);

  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const;
  // The product of every dimension but the last: the rows of a row-major matrix.
  int64_t rows() const;
  int64_t cols() const { return rank == 0 ? 1 : dims[static_cast<size_t>(rank - 1)]; }
  bool operator==(const Shape& other) const;
  std::string str() const;
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;
  Device device = Device::Cpu;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }

  // The same memory seen with another shape of the same element count.
  Tensor view(Shape new_shape) const;
  // Rows [begin, end) along the first dimension.
  Tensor slice(int64_t begin, int64_t end) const;
};

// A tensor as the matrix the products take: its last dimension the columns, the others
// folded into the rows.
inline Tensor as_matrix(const Tensor& t) { return t.view({t.shape.rows(), t.shape.cols()}); }

}  // namespace kiln
