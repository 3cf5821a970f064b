// NumPy's .npy format, version 1.0, for the GPT dataset's cached index arrays: the magic
// "\x93NUMPY", the version, a little-endian uint16 header length, a Python dict literal
// giving dtype, order and shape (padded with spaces so the data starts at a multiple of 64
// bytes), then the raw little-endian C-order array. numpy.load reads these files as they
// are, so a user can look at a run's sample order from Python.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainer/data/indexed_dataset.h"

namespace kiln {

// Writes values with the given shape (its product must equal values.size()) to path,
// through path + ".tmp.PID" renamed into place, so a reader never sees a partial file.
// T is int16_t, int32_t or int64_t.
template <typename T>
void write_npy(const std::string& path, std::span<const T> values, std::vector<int64_t> shape);

// A .npy file mapped read-only. The constructor checks the magic, the header, the dtype
// (T's) and that the file holds exactly the array the header describes.
class NpyArray {
 public:
  NpyArray() = default;
  template <typename T>
  static NpyArray open(const std::string& path);

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size() const;
  template <typename T>
  std::span<const T> values() const {
    return {reinterpret_cast<const T*>(file_.data() + data_at_), static_cast<size_t>(size())};
  }

 private:
  NpyArray(const std::string& path, const char* descr);

  MappedFile file_;
  std::vector<int64_t> shape_;
  uint64_t data_at_ = 0;
};

}  // namespace kiln
