// The safetensors file format, as Hugging Face defines it: an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and [begin, end) byte range in
// the data that follows, then the data. An optional "__metadata__" object maps strings to
// strings. Checkpoints store kiln's model and optimizer this way, so other tools can read
// them without kiln.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/checkpoint/durable_file.h"

namespace kiln {

// "F32", "BF16", ... and back; an unknown name is an error naming the file.
const char* safetensors_dtype(DType dtype);
DType dtype_from_safetensors(const std::string& name, const std::string& file);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

// Writes the header for `tensors` (in this order) and then their bytes, handed one tensor
// at a time by the caller in the same order through write_tensor, so a model larger than
// host memory never needs one host buffer for all of it.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::vector<TensorInfo>& tensors,
                    const std::map<std::string, std::string>& metadata = {},
                    FileAccess access = FileAccess::Shared);
  void write_tensor(const void* data, size_t bytes);
  // Flushes, fsyncs; returns the file's size and SHA-256.
  DurableWriter& close();

 private:
  DurableWriter out_;
  std::vector<size_t> sizes_;
  size_t next_ = 0;
};

// A safetensors file mapped into memory read-only, checked on open: the header parses, every
// dtype is known, every range matches its shape and lies inside the file, and the ranges
// tile the data without gaps or overlaps. A file that fails any check is an error naming it.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const TensorInfo& info(const std::string& name) const;
  // The tensor's bytes in the file.
  std::span<const std::byte> data(const std::string& name) const;

 private:
  void parse();

  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::vector<std::pair<size_t, size_t>> ranges_;  // per tensor, in the data section
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kiln
