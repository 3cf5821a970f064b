#include "trainer/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/check.h"

namespace kiln {
namespace {

using nlohmann::json;

// A header larger than this is not a real one (Hugging Face's reader uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypes[] = {{DType::F32, "F32"},   {DType::F64, "F64"}, {DType::I32, "I32"},
                                 {DType::I64, "I64"},   {DType::BF16, "BF16"}, {DType::F16, "F16"}};

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  fail("checkpoint: " + path + " is not a valid safetensors file: " + why);
}

}  // namespace

const char* safetensors_dtype(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  fail(std::string("safetensors: no name for dtype ") + dtype_name(dtype));
}

DType dtype_from_safetensors(const std::string& name, const std::string& file) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.dtype;
  bad_file(file, "dtype " + name + " is not one kiln reads (F32, F64, I32, I64, BF16, F16)");
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, const std::vector<TensorInfo>& tensors,
                                     const std::map<std::string, std::string>& metadata, FileAccess access)
    : out_(path, access) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const TensorInfo& t : tensors) {
    const size_t bytes = static_cast<size_t>(t.shape.numel()) * dtype_size(t.dtype);
    json shape = json::array();
    for (int i = 0; i < t.shape.rank; ++i) shape.push_back(t.shape[i]);
    header[t.name] = {{"dtype", safetensors_dtype(t.dtype)},
                      {"shape", shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    sizes_.push_back(bytes);
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the format recommends.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(length >> (8 * i));
  out_.write(prefix, 8);
  out_.write(text.data(), text.size());
}

void SafetensorsWriter::write_tensor(const void* data, size_t bytes) {
  KILN_CHECK(next_ < sizes_.size() && bytes == sizes_[next_],
             "safetensors: tensor " + std::to_string(next_) + " written with the wrong size");
  out_.write(data, bytes);
  ++next_;
}

DurableWriter& SafetensorsWriter::close() {
  KILN_CHECK(next_ == sizes_.size(), "safetensors: closed before every tensor was written");
  out_.close();
  return out_;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("checkpoint: cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  fstat(fd, &st);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    bad_file(path, "it is " + std::to_string(size_) + " bytes long");
  }
  map_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail("checkpoint: cannot map " + path + ": " + std::strerror(errno));
  }
  try {
    parse();
  } catch (...) {
    munmap(map_, size_);
    throw;
  }
}

void SafetensorsFile::parse() {
  const std::string& path = path_;
  const auto* bytes = static_cast<const unsigned char*>(map_);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (length > kMaxHeaderBytes || length > size_ - 8)
    bad_file(path, "its header length " + std::to_string(length) + " runs past the file");
  data_start_ = 8 + length;
  const json header = json::parse(bytes + 8, bytes + data_start_, nullptr, false);
  if (!header.is_object()) bad_file(path, "its header is not a JSON object");

  std::vector<std::pair<std::pair<size_t, size_t>, std::string>> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) bad_file(path, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items())
        metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
      continue;
    }
    const auto dtype = entry.find("dtype");
    const auto shape = entry.find("shape");
    const auto offsets = entry.find("data_offsets");
    if (!entry.is_object() || dtype == entry.end() || !dtype->is_string() ||
        shape == entry.end() || !shape->is_array() || offsets == entry.end() ||
        !offsets->is_array() || offsets->size() != 2)
      bad_file(path, "tensor " + name + " lacks dtype, shape or data_offsets");
    TensorInfo info;
    info.name = name;
    info.dtype = dtype_from_safetensors(dtype->get<std::string>(), path);
    if (shape->size() > static_cast<size_t>(kMaxDims))
      bad_file(path, "tensor " + name + " has more than " + std::to_string(kMaxDims) + " dimensions");
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) bad_file(path, "tensor " + name + " has a bad shape");
      info.shape.dims[static_cast<size_t>(info.shape.rank++)] = d.get<int64_t>();
    }
    if (!(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
      bad_file(path, "tensor " + name + " has bad data_offsets");
    const size_t begin = (*offsets)[0].get<size_t>(), end = (*offsets)[1].get<size_t>();
    const size_t expected = static_cast<size_t>(info.shape.numel()) * dtype_size(info.dtype);
    if (end < begin || end - begin != expected)
      bad_file(path, "tensor " + name + " holds " + std::to_string(end - begin) +
                         " bytes for a shape of " + std::to_string(expected));
    if (end > size_ - data_start_)
      bad_file(path, "tensor " + name + " runs past the end of the file (truncated?)");
    index_[name] = tensors_.size();
    tensors_.push_back(info);
    ranges_.push_back({begin, end});
    spans.push_back({{begin, end}, name});
  }
  std::sort(spans.begin(), spans.end());
  size_t expected_begin = 0;
  for (const auto& [range, name] : spans) {
    if (range.first != expected_begin)
      bad_file(path, "tensor " + name + " leaves a gap or overlaps the tensor before it");
    expected_begin = range.second;
  }
  if (expected_begin != size_ - data_start_)
    bad_file(path, "the file has " + std::to_string(size_ - data_start_ - expected_begin) +
                       " bytes after the last tensor");
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail("checkpoint: " + path_ + " has no tensor " + name);
  return tensors_[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const std::string& name) const {
  info(name);
  const auto [begin, end] = ranges_[index_.at(name)];
  return {static_cast<const std::byte*>(map_) + data_start_ + begin, end - begin};
}

}  // namespace kiln
