#include "kernels/tensor.h"

#include "base/check.h"

namespace kiln {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::E4M3:
    case DType::E5M2: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "fp32";
    case DType::F64: return "fp64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
  }
  return "?";
}

Shape::Shape(std::initializer_list<int64_t> list) {
  KILN_CHECK(list.size() <= kMaxDims, "a shape has at most 4 dimensions");
  for (int64_t d : list) dims[static_cast<size_t>(rank++)] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

int64_t Shape::rows() const {
  int64_t n = 1;
  for (int i = 0; i + 1 < rank; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank != other.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<size_t>(i)] != other.dims[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[static_cast<size_t>(i)]);
  }
  return s + "]";
}

Tensor Tensor::view(Shape new_shape) const {
  KILN_CHECK(new_shape.numel() == numel(),
             "view " + new_shape.str() + " does not match " + shape.str());
  Tensor t = *this;
  t.shape = new_shape;
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  KILN_CHECK(shape.rank > 0 && begin >= 0 && begin <= end && end <= shape[0],
             "slice out of range of " + shape.str());
  Tensor t = *this;
  const int64_t row = numel() / (shape[0] == 0 ? 1 : shape[0]);
  t.data = static_cast<char*>(data) + static_cast<size_t>(begin * row) * dtype_size(dtype);
  t.shape.dims[0] = end - begin;
  return t;
}

}  // namespace kiln
