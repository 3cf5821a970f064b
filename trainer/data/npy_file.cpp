#include "trainer/data/npy_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "base/check.h"

namespace kiln {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr size_t kPreamble = kMagicBytes + 2 + 2;  // magic, version 1.0, header length

template <typename T>
const char* descr_of() {
  if constexpr (std::is_same_v<T, int16_t>) return "<i2";
  if constexpr (std::is_same_v<T, int32_t>) return "<i4";
  if constexpr (std::is_same_v<T, int64_t>) return "<i8";
}

std::string shape_literal(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t n : shape) out += (out.empty() ? "" : ", ") + std::to_string(n);
  return "(" + out + (shape.size() == 1 ? ",)" : ")");  // Python's tuples: (3,) and (3, 2)
}

// The value text after `'key': ` in the header dict, up to the next comma outside
// parentheses (the shape tuple holds commas).
std::string field(std::string_view header, const std::string& key, const std::string& path) {
  const std::string quoted = "'" + key + "':";
  const size_t at = header.find(quoted);
  if (at == std::string_view::npos) fail(path + ": .npy header has no '" + key + "'");
  size_t begin = header.find_first_not_of(' ', at + quoted.size()), end = begin;
  for (int depth = 0; end < header.size(); ++end) {
    if (header[end] == '(') ++depth;
    if (header[end] == ')') --depth;
    if (depth == 0 && (header[end] == ',' || header[end] == '}')) break;
  }
  return std::string(header.substr(begin, end - begin));
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& path) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    fail(path + ": .npy shape " + text + " is not a tuple");
  std::vector<int64_t> shape;
  const char* p = text.c_str() + 1;
  while (true) {
    while (*p == ' ' || *p == ',') ++p;
    if (*p == ')') break;
    char* end = nullptr;
    const long long n = std::strtoll(p, &end, 10);
    if (end == p || n < 0) fail(path + ": .npy shape " + text + " is malformed");
    shape.push_back(n);
    p = end;
  }
  return shape;
}

}  // namespace

template <typename T>
void write_npy(const std::string& path, std::span<const T> values, std::vector<int64_t> shape) {
  int64_t count = 1;
  for (int64_t n : shape) count *= n;
  KILN_CHECK(count == static_cast<int64_t>(values.size()),
             path + ": shape " + shape_literal(shape) + " does not hold " +
                 std::to_string(values.size()) + " values");
  std::string header = std::string("{'descr': '") + descr_of<T>() +
                       "', 'fortran_order': False, 'shape': " + shape_literal(shape) + ", }";
  // Spaces then a newline bring the data to a multiple of 64 bytes, as numpy writes it.
  header.append(63 - (kPreamble + header.size()) % 64, ' ');
  header += '\n';

  // The process id keeps apart ranks that build the same cache at once.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wbe");
  if (!f) fail("cannot create " + tmp + ": " + std::strerror(errno));
  const unsigned char preamble[kPreamble] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xff),
      static_cast<unsigned char>(header.size() >> 8)};
  const bool ok = std::fwrite(preamble, 1, kPreamble, f) == kPreamble &&
                  std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
                  std::fwrite(values.data(), sizeof(T), values.size(), f) == values.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    fail("cannot write " + tmp + ": " + std::strerror(errno));
  }
  std::filesystem::rename(tmp, path);
}

template <typename T>
NpyArray NpyArray::open(const std::string& path) {
  return NpyArray(path, descr_of<T>());
}

NpyArray::NpyArray(const std::string& path, const char* descr) : file_(path) {
  const uint8_t* bytes = file_.data();
  if (file_.size() < kPreamble || std::memcmp(bytes, kNpyMagic, kMagicBytes) != 0 || bytes[6] != 1)
    fail(path + ": not a version 1 .npy file");
  const size_t header_bytes = bytes[8] | (static_cast<size_t>(bytes[9]) << 8);
  data_at_ = kPreamble + header_bytes;
  if (file_.size() < data_at_) fail(path + ": .npy header runs past the end of the file");
  const std::string_view header(reinterpret_cast<const char*>(bytes) + kPreamble, header_bytes);
  const std::string want = std::string("'") + descr + "'";
  if (field(header, "descr", path) != want)
    fail(path + ": .npy dtype " + field(header, "descr", path) + ", expected " + want);
  if (field(header, "fortran_order", path) != "False")
    fail(path + ": .npy array is in Fortran order");
  shape_ = parse_shape(field(header, "shape", path), path);
  const uint64_t element = std::strlen(descr) == 3 ? static_cast<uint64_t>(descr[2] - '0') : 0;
  if (file_.size() - data_at_ != static_cast<uint64_t>(size()) * element)
    fail(path + ": .npy file holds " + std::to_string(file_.size() - data_at_) +
         " bytes of data, its header promises " + std::to_string(size() * element));
}

int64_t NpyArray::size() const {
  int64_t count = 1;
  for (int64_t n : shape_) count *= n;
  return count;
}

template void write_npy<int16_t>(const std::string&, std::span<const int16_t>,
                                 std::vector<int64_t>);
template void write_npy<int32_t>(const std::string&, std::span<const int32_t>,
                                 std::vector<int64_t>);
template void write_npy<int64_t>(const std::string&, std::span<const int64_t>,
                                 std::vector<int64_t>);
template NpyArray NpyArray::open<int16_t>(const std::string&);
template NpyArray NpyArray::open<int32_t>(const std::string&);
template NpyArray NpyArray::open<int64_t>(const std::string&);

}  // namespace kiln
