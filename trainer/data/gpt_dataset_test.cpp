#include "trainer/data/gpt_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <numeric>
#include <vector>

#include "kernels/check.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::error_of;

// Two datasets whose token ids are their position in the concatenated corpus, so every
// expected sample can be written down as a run of consecutive numbers:
//   a (uint16): 4 documents of 5, 7, 3, 5 tokens, ids 0..19
//   b (int32):  6 documents of 4, 6, 2, 8, 5, 5 tokens, ids 20..49
// With split "6,2,2" over the 10 documents: train = a's 4 + b's first 2 (ids 0..29),
// valid = b's documents 2, 3 (ids 30..39), test = b's documents 4, 5 (ids 40..49).
class GptDatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) /
           ("kiln_gpt_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    int32_t next = 0;
    write(a(), 257, {5, 7, 3, 5}, next);
    write(b(), 100000, {4, 6, 2, 8, 5, 5}, next);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string a() const { return (dir_ / "a").string(); }
  std::string b() const { return (dir_ / "b").string(); }

  static void write(const std::string& prefix, int64_t vocab, const std::vector<int>& lengths,
                    int32_t& next) {
    IndexedDatasetWriter writer(prefix, vocab);
    for (int length : lengths) {
      std::vector<int32_t> doc(static_cast<size_t>(length));
      std::iota(doc.begin(), doc.end(), next);
      next += length;
      writer.add_document(doc);
    }
    writer.finish();
  }

  static std::vector<int32_t> sample(const GptDataset& ds, int64_t index) {
    std::vector<int32_t> out(static_cast<size_t>(ds.seq_len()) + 1);
    ds.sample(index, out.data());
    return out;
  }

  static std::vector<int32_t> run(int32_t first, int count) {
    std::vector<int32_t> out(static_cast<size_t>(count));
    std::iota(out.begin(), out.end(), first);
    return out;
  }

  fs::path dir_;
};

TEST(SplitBoundaries, FollowsMegatronRounding) {
  EXPECT_EQ(split_boundaries("98,2,0", 100), (std::vector<int64_t>{0, 98, 100, 100}));
  EXPECT_EQ(split_boundaries("969,30,1", 1000), (std::vector<int64_t>{0, 969, 999, 1000}));
  EXPECT_EQ(split_boundaries("969, 30, 1", 10), (std::vector<int64_t>{0, 10, 10, 10}));
  EXPECT_EQ(split_boundaries("1,1,1", 10), (std::vector<int64_t>{0, 3, 7, 10}));
  EXPECT_EQ(split_boundaries("0.8,0.1,0.1", 7), (std::vector<int64_t>{0, 6, 6, 7}));
  // Halves round to even, as Python's round(): 2.5 -> 2, 3.5 -> 4.
  EXPECT_EQ(split_boundaries("1,1", 5), (std::vector<int64_t>{0, 2, 5, 5}));
  EXPECT_EQ(split_boundaries("1,1", 7), (std::vector<int64_t>{0, 4, 7, 7}));
  EXPECT_EQ(split_boundaries("1", 3), (std::vector<int64_t>{0, 3, 3, 3}));
  EXPECT_EQ(split_boundaries("0,1,0", 4), (std::vector<int64_t>{0, 0, 4, 4}));
  EXPECT_EQ(split_boundaries("98,2,0", 0), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(SplitBoundaries, RejectsMalformedWeights) {
  EXPECT_EQ(error_of([] { split_boundaries("", 10); }),
            "data: split \"\" is malformed: \"\" is not a non-negative number (expected e.g. "
            "\"98,2,0\")");
  EXPECT_EQ(error_of([] { split_boundaries("98,x,0", 10); }),
            "data: split \"98,x,0\" is malformed: \"x\" is not a non-negative number (expected "
            "e.g. \"98,2,0\")");
  EXPECT_EQ(error_of([] { split_boundaries("98,,2", 10); }),
            "data: split \"98,,2\" is malformed: \"\" is not a non-negative number (expected e.g. "
            "\"98,2,0\")");
  EXPECT_EQ(error_of([] { split_boundaries("98,-2,0", 10); }),
            "data: split \"98,-2,0\" is malformed: \"-2\" is not a non-negative number (expected "
            "e.g. \"98,2,0\")");
  EXPECT_EQ(error_of([] { split_boundaries("98 2", 10); }),
            "data: split \"98 2\" is malformed: \"98 2\" is not a non-negative number (expected "
            "e.g. \"98,2,0\")");
  EXPECT_EQ(error_of([] { split_boundaries("1,2,3,4", 10); }),
            "data: split \"1,2,3,4\" has more than three weights (train, valid, test)");
  EXPECT_EQ(error_of([] { split_boundaries("0,0,0", 10); }),
            "data: split \"0,0,0\" has no positive weight");
  EXPECT_EQ(error_of([] { split_boundaries("1e999,1", 10); }),
            "data: split \"1e999,1\" is malformed: \"1e999\" is not a non-negative number "
            "(expected e.g. \"98,2,0\")");
}

TEST_F(GptDatasetTest, SplitsDocumentsAcrossDatasets) {
  const GptDataset train({a(), b()}, "6,2,2", Split::Train, 4, 1);
  const GptDataset valid({a(), b()}, "6,2,2", Split::Valid, 4, 1);
  const GptDataset test({a(), b()}, "6,2,2", Split::Test, 4, 1);
  EXPECT_EQ(train.num_tokens(), 30);
  EXPECT_EQ(valid.num_tokens(), 10);
  EXPECT_EQ(test.num_tokens(), 10);
  EXPECT_EQ(train.num_samples(), 7);  // (30 - 1) / 4
  EXPECT_EQ(valid.num_samples(), 2);  // (10 - 1) / 4
  EXPECT_EQ(train.max_token_id(), 29);
  EXPECT_EQ(valid.max_token_id(), 39);
  EXPECT_EQ(test.max_token_id(), 49);
}

TEST_F(GptDatasetTest, ValidSamplesAreWindowsInOrderAndWrap) {
  const GptDataset valid({a(), b()}, "6,2,2", Split::Valid, 4, 1);
  EXPECT_EQ(sample(valid, 0), run(30, 5));  // crosses from document 2 (ids 30, 31) into 3
  EXPECT_EQ(sample(valid, 1), run(34, 5));  // shares id 34 with sample 0
  EXPECT_EQ(sample(valid, 2), run(30, 5));  // the next pass starts over
  EXPECT_EQ(sample(valid, 5), run(34, 5));
  const GptDataset test({a(), b()}, "6,2,2", Split::Test, 3, 1);
  EXPECT_EQ(test.num_samples(), 3);
  EXPECT_EQ(sample(test, 2), run(46, 4));
}

TEST_F(GptDatasetTest, TrainSamplesCrossDocumentAndDatasetBoundaries) {
  const GptDataset train({a(), b()}, "6,2,2", Split::Train, 4, 7);
  std::vector<int64_t> seen;
  for (int64_t i = 0; i < train.num_samples(); ++i) {
    const int64_t k = train.sample_position(i);
    // Sample k is tokens [4k, 4k + 5): sample 4 (ids 16..20) spans a's end and b's start.
    EXPECT_EQ(sample(train, i), run(static_cast<int32_t>(4 * k), 5)) << "index " << i;
    seen.push_back(k);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST_F(GptDatasetTest, SplitWithinOneDatasetStartsMidFile) {
  // "1,1" over 10 documents: train = a + b's first document, valid = b's documents 1..5.
  const GptDataset valid({a(), b()}, "1,1", Split::Valid, 8, 1);
  EXPECT_EQ(valid.num_tokens(), 26);  // b's documents 1..5: ids 24..49
  EXPECT_EQ(sample(valid, 0), run(24, 9));
  EXPECT_EQ(sample(valid, 2), run(40, 9));
}

TEST_F(GptDatasetTest, ShuffleIsAPermutationPerEpochDeterministicBySeed) {
  // One document of 4001 tokens, seq_len 1: 4000 samples, sample k = {k, k + 1}.
  const std::string big = (dir_ / "big").string();
  int32_t next = 0;
  write(big, 100000, {4001}, next);
  const GptDataset ds({big}, "1,0,0", Split::Train, 1, 1234);
  const GptDataset same({big}, "1,0,0", Split::Train, 1, 1234);
  const GptDataset other({big}, "1,0,0", Split::Train, 1, 99);
  const int64_t n = ds.num_samples();
  ASSERT_EQ(n, 4000);

  auto order = [n](const GptDataset& d, int64_t epoch) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(d.sample_position(epoch * n + i));
    return out;
  };
  const std::vector<int64_t> e0 = order(ds, 0), e1 = order(ds, 1);
  for (const auto& e : {e0, e1}) {
    std::vector<int64_t> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> identity(static_cast<size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(sorted, identity);  // every sample exactly once per epoch
    EXPECT_NE(e, identity);       // and actually shuffled
  }
  EXPECT_NE(e0, e1);              // reshuffled each epoch
  EXPECT_EQ(e0, order(same, 0));  // same seed, same order
  EXPECT_EQ(e1, order(same, 1));
  EXPECT_NE(e0, order(other, 0));                       // another seed, another order
  for (int64_t i : {int64_t{0}, int64_t{17}, n + 5}) {  // contents follow the position
    const int32_t k = static_cast<int32_t>(ds.sample_position(i));
    EXPECT_EQ(sample(ds, i), (std::vector<int32_t>{k, k + 1}));
  }
  // Pinned, so a change to the shuffle (which would change every run's data order) is seen.
  EXPECT_EQ((std::vector<int64_t>{e0[0], e0[1], e0[2], e0[3], e1[0]}),
            (std::vector<int64_t>{1399, 2660, 3201, 3709, 976}));
}

TEST_F(GptDatasetTest, SingleSampleSplit) {
  const std::string tiny = (dir_ / "tiny").string();
  int32_t next = 0;
  write(tiny, 257, {3, 2}, next);
  const GptDataset ds({tiny}, "1", Split::Train, 4, 5);
  EXPECT_EQ(ds.num_samples(), 1);
  EXPECT_EQ(sample(ds, 0), run(0, 5));
  EXPECT_EQ(sample(ds, 3), run(0, 5));
}

TEST_F(GptDatasetTest, RejectsTooShortAndEmptySplits) {
  EXPECT_EQ(error_of([&] {
              GptDataset ds({a(), b()}, "6,2,2", Split::Valid, 128, 1);
            }),
            "data: the valid split of " + a() + " + " + b() +
                " has 10 tokens, fewer than one sample of seq_len + 1 = 129");
  EXPECT_EQ(error_of([&] {
              GptDataset ds({a(), b()}, "6,2,2", Split::Valid, 10, 1);
            }),
            "data: the valid split of " + a() + " + " + b() +
                " has 10 tokens, fewer than one sample of seq_len + 1 = 11");
  EXPECT_EQ(error_of([&] { GptDataset ds({a(), b()}, "6,2,2", Split::Valid, 9, 1); }), "(no error)");
  // A positive weight that rounds to no documents: 0.01 of 10 documents.
  EXPECT_EQ(error_of([&] { GptDataset ds({a()}, "99,1,0", Split::Valid, 4, 1); }),
            "data: the valid split of " + a() +
                " has 0 tokens, fewer than one sample of seq_len + 1 = 5");
  EXPECT_EQ(error_of([&] { GptDataset ds({a()}, "98,2,0", Split::Test, 4, 1); }),
            "data: the test split has weight 0 in split \"98,2,0\", so it holds no documents");
  EXPECT_EQ(error_of([&] { GptDataset ds({a()}, "98,x", Split::Train, 4, 1); }),
            "data: split \"98,x\" is malformed: \"x\" is not a non-negative number (expected e.g. "
            "\"98,2,0\")");
  EXPECT_EQ(error_of([&] { GptDataset ds({}, "1", Split::Train, 4, 1); }),
            "data: no dataset paths given");
  EXPECT_EQ(error_of([&] { GptDataset ds({a()}, "1", Split::Train, 0, 1); }),
            "data: seq_len must be at least 1, got 0");
  EXPECT_EQ(error_of([&] { GptDataset ds({a() + "-missing"}, "1", Split::Train, 4, 1); }),
            a() + "-missing.idx: cannot open: No such file or directory");
  const GptDataset ok({a()}, "1", Split::Train, 4, 1);
  std::vector<int32_t> out(5);
  EXPECT_EQ(error_of([&] { ok.sample(-1, out.data()); }), "data: negative sample index -1");
}

}  // namespace
}  // namespace kiln
