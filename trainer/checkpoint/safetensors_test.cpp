#include "trainer/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/check.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string temp_file(const std::string& name) {
  return (fs::path(testing::TempDir()) / (name + "_" + std::to_string(getpid()))).string();
}

using test::error_of;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with an f32 matrix, a bf16 vector and an i64 scalar-like tensor.
std::string write_sample(const std::string& name) {
  const std::string path = temp_file(name);
  const float matrix[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  const uint16_t half[3] = {0x3f80, 0xc000, 0x0001};
  const int64_t count[1] = {42};
  SafetensorsWriter w(path,
                      {{"layer.weight", DType::F32, {2, 3}},
                       {"layer.norm", DType::BF16, {3}},
                       {"steps", DType::I64, {1}}},
                      {{"format", "kiln-checkpoint"}});
  w.write_tensor(matrix, sizeof matrix);
  w.write_tensor(half, sizeof half);
  w.write_tensor(count, sizeof count);
  w.close();
  return path;
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  const std::string path = write_sample("st_roundtrip");
  const SafetensorsFile file(path);
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.metadata().at("format"), "kiln-checkpoint");
  EXPECT_EQ(file.info("layer.weight").dtype, DType::F32);
  EXPECT_EQ(file.info("layer.weight").shape, (Shape{2, 3}));
  EXPECT_EQ(file.info("layer.norm").dtype, DType::BF16);
  const auto matrix = file.data("layer.weight");
  ASSERT_EQ(matrix.size(), 24u);
  float values[6];
  std::memcpy(values, matrix.data(), 24);
  EXPECT_EQ(values[2], 3.25f);
  EXPECT_EQ(values[4], 1e-30f);
  int64_t count = 0;
  std::memcpy(&count, file.data("steps").data(), 8);
  EXPECT_EQ(count, 42);
  EXPECT_FALSE(file.contains("missing"));
  EXPECT_EQ(error_of([&] { file.info("missing"); }), "checkpoint: " + path + " has no tensor missing");
}

TEST(Safetensors, TheLayoutIsTheFormatsOwn) {
  // 8-byte little-endian header length, JSON header padded so the data starts 8-aligned,
  // then the tensors back to back in the order given.
  const std::string bytes = bytes_of(write_sample("st_layout"));
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(length % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, length));
  EXPECT_EQ(header["layer.weight"]["dtype"], "F32");
  EXPECT_EQ(header["layer.weight"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(header["layer.weight"]["data_offsets"], nlohmann::json::array({0, 24}));
  EXPECT_EQ(header["layer.norm"]["data_offsets"], nlohmann::json::array({24, 30}));
  EXPECT_EQ(header["steps"]["data_offsets"], nlohmann::json::array({30, 38}));
  EXPECT_EQ(bytes.size(), 8 + length + 38);
}

TEST(Safetensors, RefusesDamagedFilesNamingThem) {
  const std::string path = write_sample("st_damaged");
  const std::string good = bytes_of(path);
  const std::string prefix = "checkpoint: " + path + " is not a valid safetensors file: ";

  put_bytes(path, good.substr(0, good.size() - 3));
  EXPECT_EQ(error_of([&] { SafetensorsFile f(path); }),
            prefix + "tensor steps runs past the end of the file (truncated?)");

  put_bytes(path, good + "xyz");
  EXPECT_EQ(error_of([&] { SafetensorsFile f(path); }),
            prefix + "the file has 3 bytes after the last tensor");

  put_bytes(path, good.substr(0, 5));
  EXPECT_EQ(error_of([&] { SafetensorsFile f(path); }), prefix + "it is 5 bytes long");

  std::string huge = good;
  huge[6] = 1;  // a header length of 2^48
  put_bytes(path, huge);
  EXPECT_NE(error_of([&] { SafetensorsFile f(path); }).find("runs past the file"), std::string::npos);

  std::string dtype = good;
  dtype.replace(dtype.find("\"BF16\""), 6, "\"Q4_0\"");
  put_bytes(path, dtype);
  EXPECT_EQ(error_of([&] { SafetensorsFile f(path); }),
            prefix + "dtype Q4_0 is not one kiln reads (F32, F64, I32, I64, BF16, F16)");

  std::string overlap = good;
  overlap.replace(overlap.find("[24,30]"), 7, "[22,28]");
  put_bytes(path, overlap);
  EXPECT_EQ(error_of([&] { SafetensorsFile f(path); }),
            prefix + "tensor layer.norm leaves a gap or overlaps the tensor before it");

  std::string shape = good;
  shape.replace(shape.find("[2,3]"), 5, "[3,3]");
  put_bytes(path, shape);
  EXPECT_EQ(error_of([&] { SafetensorsFile f(path); }),
            prefix + "tensor layer.weight holds 24 bytes for a shape of 36");
}

}  // namespace
}  // namespace kiln
