#include "trainer/data/gpt_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::error_of;

// A dataset whose token ids are their position in the file, so a sample's tokens show
// where they came from: 10 documents of 5, 7, 3, 5, 4, 6, 2, 8, 5, 5 tokens, ids 0..49.
// Split "6,2,2": train = documents 0..5 (ids 0..29), valid = 6, 7 (ids 30..39), test =
// 8, 9 (ids 40..49).
class GptDatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) /
           ("kiln_gpt_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write(prefix(), {5, 7, 3, 5, 4, 6, 2, 8, 5, 5});
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string prefix() const { return (dir_ / "a").string(); }

  static void write(const std::string& prefix, const std::vector<int>& lengths) {
    IndexedDatasetWriter writer(prefix, 100000);
    int32_t next = 0;
    for (int length : lengths) {
      std::vector<int32_t> doc(static_cast<size_t>(length));
      std::iota(doc.begin(), doc.end(), next);
      next += length;
      writer.add_document(doc);
    }
    writer.finish();
  }

  GptDatasetSpec spec(Split which, int64_t samples, int seq_len, uint64_t seed = 1) const {
    GptDatasetSpec s;
    s.prefix = prefix();
    s.split = "6,2,2";
    s.which = which;
    s.num_samples = samples;
    s.seq_len = seq_len;
    s.seed = seed;
    return s;
  }

  static std::vector<int32_t> sample(const SampleSource& ds, int64_t index, int seq_len) {
    std::vector<int32_t> out(static_cast<size_t>(seq_len) + 1);
    ds.sample(index, out.data());
    return out;
  }

  // What a dataset printed to its log.
  static std::string log_of(const std::function<void(std::FILE*)>& f) {
    std::FILE* log = std::tmpfile();
    f(log);
    std::rewind(log);
    std::string text;
    for (int c; (c = std::fgetc(log)) != EOF;) text += static_cast<char>(c);
    std::fclose(log);
    return text;
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

TEST_F(GptDatasetTest, SplitsTheDocumentsContiguously) {
  const GptDataset train(spec(Split::Train, 1, 4)), valid(spec(Split::Valid, 1, 4)),
      test(spec(Split::Test, 1, 4));
  EXPECT_EQ(train.num_documents(), 6);
  EXPECT_EQ(train.num_tokens(), 30);
  EXPECT_EQ(valid.num_tokens(), 10);
  EXPECT_EQ(test.num_tokens(), 10);
  EXPECT_EQ(train.max_token_id(), 29);
  EXPECT_EQ(valid.max_token_id(), 39);
  EXPECT_EQ(test.max_token_id(), 49);
  // One epoch holds (30 - 1) / 4 = 7 samples, all of them indexed however few were asked.
  EXPECT_EQ(train.num_samples(), 7);
  EXPECT_EQ(train.num_epochs(), 1);
}

TEST_F(GptDatasetTest, SamplesAreWindowsOfTheShuffledDocumentStream) {
  // 40 samples of 4 need 161 tokens: 6 epochs of the 30-token train split.
  const GptDataset train(spec(Split::Train, 40, 4, 7));
  EXPECT_EQ(train.num_epochs(), 6);
  EXPECT_EQ(train.num_samples(), (6 * 30 - 1) / 4);
  const NpyArray documents = NpyArray::open<int32_t>(train.cache_stem() + "document_index.npy");
  const NpyArray shuffle = NpyArray::open<int64_t>(train.cache_stem() + "shuffle_index.npy");
  // Each epoch's documents appear 6 times in all.
  std::vector<int> seen(6, 0);
  for (int32_t d : documents.values<int32_t>()) ++seen.at(static_cast<size_t>(d));
  EXPECT_EQ(seen, std::vector<int>(6, 6));
  // The stream: the documents' tokens in document-index order. Sample k of the stream is
  // tokens [4k, 4k + 5); the i-th sample visited is sample shuffle[i].
  const int lengths[] = {5, 7, 3, 5, 4, 6}, starts[] = {0, 5, 12, 15, 20, 24};
  std::vector<int32_t> stream;
  for (int32_t d : documents.values<int32_t>())
    for (int t = 0; t < lengths[d]; ++t) stream.push_back(starts[d] + t);
  std::vector<int64_t> order(shuffle.values<int64_t>().begin(), shuffle.values<int64_t>().end());
  for (int64_t i = 0; i < train.num_samples(); ++i) {
    const auto k = static_cast<size_t>(order[static_cast<size_t>(i)]);
    EXPECT_EQ(sample(train, i, 4), std::vector<int32_t>(stream.begin() + 4 * k,
                                                        stream.begin() + 4 * k + 5))
        << "sample " << i;
  }
  std::sort(order.begin(), order.end());
  for (size_t k = 0; k < order.size(); ++k) ASSERT_EQ(order[k], static_cast<int64_t>(k));
}

TEST_F(GptDatasetTest, BuiltOnceThenLoadedFromTheCache) {
  const std::string first = log_of([&](std::FILE* log) { GptDataset ds(spec(Split::Train, 40, 4), log); });
  EXPECT_NE(first.find("kiln: data train: built indices of 44 samples (6 epochs) into "), std::string::npos)
      << first;
  const std::string again = log_of([&](std::FILE* log) { GptDataset ds(spec(Split::Train, 40, 4), log); });
  EXPECT_NE(again.find("kiln: data train: loaded indices of 44 samples (6 epochs) from "), std::string::npos)
      << again;
  // What shapes the indices names the cache: another seed, length or count builds anew.
  const GptDataset base(spec(Split::Train, 40, 4)), seeded(spec(Split::Train, 40, 4, 2)),
      longer(spec(Split::Train, 40, 5)), more(spec(Split::Train, 41, 4));
  EXPECT_EQ(base.cache_stem().substr(0, base.cache_stem().rfind('/')), (dir_ / "cache").string());
  for (const GptDataset* other : {&seeded, &longer, &more})
    EXPECT_NE(other->cache_stem(), base.cache_stem());
  EXPECT_NE(sample(seeded, 0, 4), sample(base, 0, 4));
  // Megatron's file names: NAME-HASH-SPLIT-ARRAY.npy beside a description.
  for (const char* array : {"document_index.npy", "sample_index.npy", "shuffle_index.npy",
                            "description.json"})
    EXPECT_TRUE(fs::exists(base.cache_stem() + array)) << array;
}

TEST_F(GptDatasetTest, ADamagedCacheIsBuiltAgain) {
  std::string stem;
  std::vector<int32_t> want;
  {
    const GptDataset ds(spec(Split::Train, 20, 4));
    stem = ds.cache_stem();
    want = sample(ds, 3, 4);
  }
  fs::resize_file(stem + "shuffle_index.npy", fs::file_size(stem + "shuffle_index.npy") - 8);
  const std::string log = log_of([&](std::FILE* f) {
    const GptDataset ds(spec(Split::Train, 20, 4), f);
    EXPECT_EQ(sample(ds, 3, 4), want);
  });
  EXPECT_NE(log.find("rebuilding a damaged index cache"), std::string::npos) << log;
  EXPECT_NE(log.find("built indices"), std::string::npos) << log;

  // A description cut short is damage too, not a cache that was never there.
  fs::resize_file(stem + "description.json", fs::file_size(stem + "description.json") - 8);
  const std::string again = log_of([&](std::FILE* f) {
    const GptDataset ds(spec(Split::Train, 20, 4), f);
    EXPECT_EQ(sample(ds, 3, 4), want);
  });
  EXPECT_NE(again.find("kiln: data: rebuilding a damaged index cache (" + stem +
                       "description.json is not a JSON description)"),
            std::string::npos)
      << again;
}

TEST_F(GptDatasetTest, TheCacheCanLiveElsewhere) {
  GptDatasetSpec s = spec(Split::Valid, 2, 4);
  s.cache_dir = (dir_ / "elsewhere").string();
  const GptDataset ds(s);
  EXPECT_EQ(ds.cache_stem().rfind(s.cache_dir + "/a-", 0), 0u) << ds.cache_stem();
  EXPECT_FALSE(fs::exists(dir_ / "cache"));
  s.cache_dir = "/proc/kiln-cannot-write-here";
  EXPECT_EQ(error_of([&] { GptDataset bad(s); }).rfind(
                "data: cannot create the index cache folder /proc/kiln-cannot-write-here: ", 0),
            0u);
}

TEST_F(GptDatasetTest, ZeroSamplesMeansOneEpochAndIndicesStayInRange) {
  const GptDataset valid(spec(Split::Valid, 0, 4));
  EXPECT_EQ(valid.num_samples(), 2);  // (10 - 1) / 4
  EXPECT_EQ(valid.num_epochs(), 1);
  std::vector<int32_t> out(5);
  EXPECT_EQ(error_of([&] { valid.sample(2, out.data()); }),
            "data: sample 2 of valid is outside the 2 its indices hold");
  EXPECT_EQ(error_of([&] { valid.sample(-1, out.data()); }),
            "data: sample -1 of valid is outside the 2 its indices hold");
}

TEST_F(GptDatasetTest, RejectsTooShortAndEmptySplits) {
  EXPECT_EQ(error_of([&] { GptDataset ds(spec(Split::Valid, 1, 10)); }),
            "data: the valid split of " + prefix() +
                " has 10 tokens, fewer than one sample of seq_len + 1 = 11");
  EXPECT_EQ(error_of([&] { GptDataset ds(spec(Split::Valid, 1, 9)); }), "(no error)");
  GptDatasetSpec s = spec(Split::Valid, 1, 4);
  s.split = "99,1,0";  // a positive weight that rounds to no documents: 0.01 of 10
  EXPECT_EQ(error_of([&] { GptDataset ds(s); }),
            "data: the valid split of " + prefix() +
                " has 0 tokens, fewer than one sample of seq_len + 1 = 5");
  s.split = "98,2,0";
  s.which = Split::Test;
  EXPECT_EQ(error_of([&] { GptDataset ds(s); }),
            "data: the test split has weight 0 in split \"98,2,0\", so it holds no documents");
  s.split = "98,x";
  EXPECT_EQ(error_of([&] { GptDataset ds(s); }),
            "data: split \"98,x\" is malformed: \"x\" is not a non-negative number (expected e.g. "
            "\"98,2,0\")");
  EXPECT_EQ(error_of([&] { GptDataset ds(spec(Split::Train, 1, 0)); }),
            "data: seq_len must be at least 1, got 0");
  s = spec(Split::Train, 1, 4);
  s.prefix += "-missing";
  EXPECT_EQ(error_of([&] { GptDataset ds(s); }),
            prefix() + "-missing.idx: cannot open: No such file or directory");
}

}  // namespace
}  // namespace kiln
