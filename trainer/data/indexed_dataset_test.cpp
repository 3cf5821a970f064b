#include "trainer/data/indexed_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <vector>

#include "base/check.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test (tests may run in parallel processes).
class IndexedDatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) /
           ("kiln_idx_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string prefix(const std::string& name = "ds") const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

template <typename T>
void append(std::string& out, T value) {
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // the test host is little-endian, like the format
  out.append(raw, sizeof(T));
}

// Builds a .idx by hand, field by field, so tests can state valid and corrupt files alike.
struct RawIndex {
  std::string magic = std::string("MMIDIDX\0\0", 9);
  uint64_t version = 1;
  uint8_t code = 8;
  std::optional<uint64_t> sequence_count;  // default: lengths.size()
  std::optional<uint64_t> doc_count;       // default: docs.size()
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers;
  std::vector<int64_t> docs;

  std::string bytes() const {
    std::string out = magic;
    append(out, version);
    append(out, code);
    append(out, sequence_count.value_or(lengths.size()));
    append(out, doc_count.value_or(docs.size()));
    for (int32_t v : lengths) append(out, v);
    for (int64_t v : pointers) append(out, v);
    for (int64_t v : docs) append(out, v);
    return out;
  }
};

// The reference pair used by most corruption tests: documents {5, 6, 7} and {8, 9} as uint16.
RawIndex reference_index() {
  RawIndex idx;
  idx.lengths = {3, 2};
  idx.pointers = {0, 6};
  idx.docs = {0, 1, 2};
  return idx;
}
const std::string kReferenceBin("\x05\x00\x06\x00\x07\x00\x08\x00\x09\x00", 10);

// The message of the kiln::Error that f throws, or "" when it throws none.
using test::error_of;

std::vector<int32_t> read_all(const IndexedDataset& ds) {
  std::vector<int32_t> out(static_cast<size_t>(ds.num_tokens()));
  ds.read(0, ds.num_tokens(), out.data());
  return out;
}

TEST(IndexedDtype, MegatronCodesAndVocabularyRule) {
  EXPECT_EQ(indexed_dtype::size(indexed_dtype::kUint16), 2);
  EXPECT_EQ(indexed_dtype::size(indexed_dtype::kInt64), 8);
  EXPECT_EQ(indexed_dtype::size(0), 0);
  EXPECT_EQ(indexed_dtype::size(9), 0);
  EXPECT_STREQ(indexed_dtype::name(8), "uint16");
  EXPECT_STREQ(indexed_dtype::name(4), "int32");
  EXPECT_EQ(indexed_dtype::for_vocab(257), 8);
  EXPECT_EQ(indexed_dtype::for_vocab(65499), 8);
  EXPECT_EQ(indexed_dtype::for_vocab(65500), 4);
  EXPECT_EQ(indexed_dtype::for_vocab(128256), 4);
}

TEST_F(IndexedDatasetTest, WritesTheExactMegatronBytes) {
  IndexedDatasetWriter writer(prefix(), 257);
  writer.add_document(std::vector<int32_t>{5, 6, 7});
  writer.add_document(std::vector<int32_t>{8, 9});
  writer.finish();

  const std::string expected_idx =
      std::string("MMIDIDX\0\0", 9) + std::string("\x01\0\0\0\0\0\0\0", 8) +  // version 1
      std::string("\x08", 1) +                  // dtype code 8: uint16
      std::string("\x02\0\0\0\0\0\0\0", 8) +    // 2 sequences
      std::string("\x03\0\0\0\0\0\0\0", 8) +    // 3 document indices
      std::string("\x03\0\0\0\x02\0\0\0", 8) +  // lengths 3, 2 (int32)
      std::string("\0\0\0\0\0\0\0\0", 8) +      // pointer 0 (int64, bytes)
      std::string("\x06\0\0\0\0\0\0\0", 8) +    // pointer 6 = 3 tokens * 2 bytes
      std::string("\0\0\0\0\0\0\0\0", 8) +      // document indices 0,
      std::string("\x01\0\0\0\0\0\0\0", 8) +    //   1,
      std::string("\x02\0\0\0\0\0\0\0", 8);     //   2
  ASSERT_EQ(expected_idx.size(), 82u);
  EXPECT_EQ(slurp(prefix() + ".idx"), expected_idx);
  EXPECT_EQ(slurp(prefix() + ".bin"), kReferenceBin);
  EXPECT_EQ(expected_idx, reference_index().bytes());  // the hand builder agrees
  EXPECT_FALSE(fs::exists(prefix() + ".bin.tmp"));
  EXPECT_FALSE(fs::exists(prefix() + ".idx.tmp"));
}

TEST_F(IndexedDatasetTest, RoundTripsUint16) {
  IndexedDatasetWriter writer(prefix(), 257);
  EXPECT_EQ(writer.dtype_code(), indexed_dtype::kUint16);
  writer.add_document(std::vector<int32_t>{72, 105, 256});
  writer.add_document(std::vector<int32_t>{});      // empty: a document of zero sequences
  writer.add_tokens(std::vector<int32_t>{0, 255});  // one document streamed in pieces
  writer.add_tokens(std::vector<int32_t>{128});
  writer.end_document();
  EXPECT_EQ(writer.num_documents(), 3);
  EXPECT_EQ(writer.num_tokens(), 6);
  writer.finish();

  const IndexedDataset ds(prefix());
  EXPECT_EQ(ds.prefix(), prefix());
  EXPECT_EQ(ds.dtype_code(), indexed_dtype::kUint16);
  EXPECT_EQ(ds.num_sequences(), 2);
  EXPECT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(ds.num_tokens(), 6);
  EXPECT_EQ(fs::file_size(prefix() + ".bin"), 12u);
  EXPECT_EQ(ds.sequence_length(0), 3);
  EXPECT_EQ(ds.sequence_length(1), 3);
  EXPECT_EQ(ds.sequence_offset(0), 0);
  EXPECT_EQ(ds.sequence_offset(1), 3);
  EXPECT_EQ(ds.document_sequences(0), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(ds.document_sequences(1), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(ds.document_sequences(2), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(ds.document_tokens(1), (std::pair<int64_t, int64_t>{3, 3}));
  EXPECT_EQ(ds.document_tokens(2), (std::pair<int64_t, int64_t>{3, 6}));
  EXPECT_EQ(read_all(ds), (std::vector<int32_t>{72, 105, 256, 0, 255, 128}));
  int32_t middle[2];
  ds.read(2, 2, middle);
  EXPECT_EQ(middle[0], 256);
  EXPECT_EQ(middle[1], 0);
}

TEST_F(IndexedDatasetTest, RoundTripsInt32ForLargeVocabularies) {
  IndexedDatasetWriter writer(prefix(), 128256);
  EXPECT_EQ(writer.dtype_code(), indexed_dtype::kInt32);
  writer.add_document(std::vector<int32_t>{128255, 65535, 65536});
  writer.add_document(std::vector<int32_t>{0});
  writer.finish();

  const IndexedDataset ds(prefix());
  EXPECT_EQ(ds.dtype_code(), indexed_dtype::kInt32);
  EXPECT_EQ(ds.num_tokens(), 4);
  EXPECT_EQ(fs::file_size(prefix() + ".bin"), 16u);
  EXPECT_EQ(ds.sequence_offset(1), 3);
  EXPECT_EQ(read_all(ds), (std::vector<int32_t>{128255, 65535, 65536, 0}));
}

TEST_F(IndexedDatasetTest, WriterRejectsIdsOutsideTheVocabulary) {
  IndexedDatasetWriter writer(prefix(), 257);
  EXPECT_EQ(error_of([&] {
              writer.add_document(std::vector<int32_t>{1, 257});
            }),
            prefix() + ": token id 257 in document 0 is outside the vocabulary of 257");
  EXPECT_EQ(error_of([&] { writer.add_document(std::vector<int32_t>{-1}); }),
            prefix() + ": token id -1 in document 0 is outside the vocabulary of 257");
}

TEST_F(IndexedDatasetTest, WriterLeavesNothingWithoutFinish) {
  {
    IndexedDatasetWriter writer(prefix(), 257);
    writer.add_document(std::vector<int32_t>{1, 2, 3});
    EXPECT_TRUE(fs::exists(prefix() + ".bin.tmp"));
    EXPECT_FALSE(fs::exists(prefix() + ".bin"));
  }  // abandoned, as when prepare fails half way
  EXPECT_FALSE(fs::exists(prefix() + ".bin.tmp"));
  EXPECT_FALSE(fs::exists(prefix() + ".idx.tmp"));
  EXPECT_FALSE(fs::exists(prefix() + ".bin"));
  EXPECT_FALSE(fs::exists(prefix() + ".idx"));
}

TEST_F(IndexedDatasetTest, WriterRejectsUnwritablePathsAndMisuse) {
  const std::string missing = (dir_ / "no" / "such" / "ds").string();
  EXPECT_EQ(error_of([&] { IndexedDatasetWriter w(missing, 257); }),
            missing + ".bin.tmp: cannot create: No such file or directory");
  IndexedDatasetWriter writer(prefix(), 257);
  writer.add_tokens(std::vector<int32_t>{1});
  EXPECT_EQ(error_of([&] { writer.finish(); }),
            prefix() + ": finish() with a document still open (call end_document())");
}

// Reads files that Megatron can write but kiln never does: uint8, int8, int16, int64.
TEST_F(IndexedDatasetTest, ReadsEveryIntegerDtype) {
  struct Case {
    uint8_t code;
    std::string bin;
    std::vector<int32_t> ids;
  };
  const std::vector<Case> cases = {
      {1, std::string("\x01\xff", 2), {1, 255}},
      {2, std::string("\x01\xff", 2), {1, -1}},
      {3, std::string("\x01\x00\xff\x7f", 4), {1, 32767}},
      {5, std::string("\x01\0\0\0\0\0\0\0\x02\x01\0\0\0\0\0\0", 16), {1, 258}},
  };
  for (const Case& c : cases) {
    RawIndex idx;
    idx.code = c.code;
    idx.lengths = {2};
    idx.pointers = {0};
    idx.docs = {0, 1};
    spit(prefix() + ".idx", idx.bytes());
    spit(prefix() + ".bin", c.bin);
    const IndexedDataset ds(prefix());
    EXPECT_EQ(ds.dtype_code(), c.code);
    EXPECT_EQ(read_all(ds), c.ids) << "dtype code " << int(c.code);
  }
}

TEST_F(IndexedDatasetTest, AcceptsMultimodalModesAfterTheIndex) {
  spit(prefix() + ".idx",
       reference_index().bytes() + std::string("\0\0", 2));  // one int8 per sequence
  spit(prefix() + ".bin", kReferenceBin);
  EXPECT_EQ(IndexedDataset(prefix()).num_tokens(), 5);
}

TEST_F(IndexedDatasetTest, RejectsOutOfRangeReadsAndAccessors) {
  spit(prefix() + ".idx", reference_index().bytes());
  spit(prefix() + ".bin", kReferenceBin);
  const IndexedDataset ds(prefix());
  int32_t out[8];
  EXPECT_EQ(error_of([&] { ds.read(3, 3, out); }),
            prefix() + ".bin: read of 3 tokens at 3 runs outside its 5 tokens");
  EXPECT_EQ(error_of([&] { ds.read(-1, 1, out); }),
            prefix() + ".bin: read of 1 tokens at -1 runs outside its 5 tokens");
  EXPECT_EQ(error_of([&] { ds.sequence_length(2); }), prefix() + ": sequence 2 out of range");
  EXPECT_EQ(error_of([&] { ds.document_sequences(2); }), prefix() + ": document 2 out of range");
}

TEST_F(IndexedDatasetTest, RejectsInt64IdsThatDoNotFitInt32) {
  RawIndex idx;
  idx.code = 5;
  idx.lengths = {1};
  idx.pointers = {0};
  idx.docs = {0, 1};
  spit(prefix() + ".idx", idx.bytes());
  spit(prefix() + ".bin", std::string("\0\0\0\0\x01\0\0\0", 8));  // 2^32
  const IndexedDataset ds(prefix());
  int32_t out;
  EXPECT_EQ(error_of([&] { ds.read(0, 1, &out); }),
            prefix() + ".bin: token 0 is 4294967296, which does not fit an int32 id");
}

// Every way a pair can be broken, each with the message the user sees.
TEST_F(IndexedDatasetTest, RejectsCorruptFiles) {
  const std::string p = prefix(), idx_path = p + ".idx", bin_path = p + ".bin";
  auto expect = [&](const std::string& idx_bytes, const std::string& bin_bytes,
                    const std::string& message) {
    spit(idx_path, idx_bytes);
    spit(bin_path, bin_bytes);
    EXPECT_EQ(error_of([&] { IndexedDataset ds(p); }), message);
  };
  const std::string good = reference_index().bytes();

  expect(good, kReferenceBin, "(no error)");  // the baseline is valid

  fs::remove(idx_path);
  EXPECT_EQ(error_of([&] { IndexedDataset ds(p); }),
            idx_path + ": cannot open: No such file or directory");
  spit(idx_path, good);
  fs::remove(bin_path);
  EXPECT_EQ(error_of([&] { IndexedDataset ds(p); }),
            bin_path + ": cannot open: No such file or directory");

  expect("", kReferenceBin, idx_path + ": truncated header (0 bytes, need 34)");
  expect(good.substr(0, 20), kReferenceBin, idx_path + ": truncated header (20 bytes, need 34)");

  RawIndex bad = reference_index();
  bad.magic = std::string("MMIDIDY\0\0", 9);
  expect(bad.bytes(), kReferenceBin, idx_path + ": bad magic (not a Megatron MMIDIDX index file)");

  bad = reference_index();
  bad.version = 2;
  expect(bad.bytes(), kReferenceBin, idx_path + ": unsupported version 2 (only 1 is defined)");

  const std::string dtypes = "; token files are uint8, int8, int16, uint16, int32 or int64)";
  bad = reference_index();
  bad.code = 7;
  expect(bad.bytes(), kReferenceBin, idx_path + ": unsupported dtype code 7 (float32" + dtypes);
  bad.code = 0;
  expect(bad.bytes(), kReferenceBin, idx_path + ": unsupported dtype code 0 (unknown" + dtypes);
  bad.code = 9;
  expect(bad.bytes(), kReferenceBin, idx_path + ": unsupported dtype code 9 (unknown" + dtypes);

  bad = reference_index();
  bad.sequence_count = uint64_t{1} << 62;  // would overflow a naive size computation
  expect(bad.bytes(), kReferenceBin,
         idx_path + ": sequence count 4611686018427387904 does not fit the file (82 bytes)");
  bad.sequence_count = 4;  // fits, but leaves no room for the document indices
  expect(bad.bytes(), kReferenceBin,
         idx_path + ": document index count 3 does not fit the file (82 bytes)");
  bad = reference_index();
  bad.doc_count = 4;
  expect(bad.bytes(), kReferenceBin,
         idx_path + ": document index count 4 does not fit the file (82 bytes)");
  bad.doc_count = 2;
  expect(bad.bytes(), kReferenceBin,
         idx_path + ": 82 bytes, but its counts (2 sequences, 2 document indices) need 74");
  expect(good.substr(0, 81), kReferenceBin,  // the last document index cut short
         idx_path + ": document index count 3 does not fit the file (81 bytes)");
  expect(good + "xyz", kReferenceBin,
         idx_path + ": 85 bytes, but its counts (2 sequences, 3 document indices) need 82");

  bad = RawIndex{};
  expect(bad.bytes(), "", idx_path + ": no document indices (they must start with 0)");

  bad = reference_index();
  bad.lengths = {-3, 2};
  expect(bad.bytes(), kReferenceBin, idx_path + ": sequence 0 has negative length -3");
  bad = reference_index();
  bad.pointers = {0, 8};
  expect(bad.bytes(), kReferenceBin,
         idx_path +
             ": sequence 1 starts at byte 8, expected 6 (sequences must be stored back to back)");
  bad.pointers = {2, 6};
  expect(bad.bytes(), kReferenceBin,
         idx_path +
             ": sequence 0 starts at byte 2, expected 0 (sequences must be stored back to back)");
  bad = reference_index();
  bad.lengths = {3, 1000};
  expect(bad.bytes(), kReferenceBin,
         idx_path + ": sequence 1 (1000 tokens at byte 6) runs past the end of " + bin_path +
             " (10 bytes; truncated?)");
  expect(good, kReferenceBin.substr(0, 9),  // truncated .bin
         idx_path + ": sequence 1 (2 tokens at byte 6) runs past the end of " + bin_path +
             " (9 bytes; truncated?)");
  expect(good, kReferenceBin + std::string("\x01\x00", 2),
         bin_path + ": 12 bytes, but " + idx_path + " describes 10 (files from different runs?)");

  bad = reference_index();
  bad.docs = {1, 1, 2};
  expect(bad.bytes(), kReferenceBin, idx_path + ": document indices start at 1, not 0");
  bad.docs = {0, 2, 1};
  expect(bad.bytes(), kReferenceBin,
         idx_path + ": document index 2 is 1, below the previous 2 (they must not decrease)");
  bad.docs = {0, 1, 1};
  expect(bad.bytes(), kReferenceBin,
         idx_path + ": document indices end at 1, not at the sequence count 2");
}

TEST_F(IndexedDatasetTest, RejectsADirectoryInPlaceOfAFile) {
  fs::create_directories(prefix() + ".idx");
  EXPECT_EQ(error_of([&] { IndexedDataset ds(prefix()); }), prefix() + ".idx: not a regular file");
}

}  // namespace
}  // namespace kiln
