#include "trainer/data/blended_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::error_of;

TEST(DataPaths, PrefixesAloneOrWeightPrefixPairs) {
  const auto plain = parse_data_paths({"data/a", "data/b"});
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[1].prefix, "data/b");
  const auto weighted = parse_data_paths({"3", "data/a", "1", "data/b"});
  ASSERT_EQ(weighted.size(), 2u);
  EXPECT_EQ(weighted[0].prefix, "data/a");
  EXPECT_DOUBLE_EQ(weighted[0].weight, 0.75);
  EXPECT_DOUBLE_EQ(weighted[1].weight, 0.25);
  EXPECT_EQ(error_of([] { parse_data_paths({}); }),
            "data.paths is empty: name at least one dataset prefix");
  EXPECT_EQ(error_of([] { parse_data_paths({"0.5", "data/a", "data/b"}); }),
            "data.paths: weights and prefixes must come in pairs (weight, prefix, ...), got 3 "
            "entries");
  EXPECT_EQ(error_of([] { parse_data_paths({"0.5", "data/a", "x", "data/b"}); }),
            "data.paths: \"x\" (entry 2) is not a positive weight");
  EXPECT_EQ(error_of([] { parse_data_paths({"0", "data/a"}); }),
            "data.paths: \"0\" (entry 0) is not a positive weight");
  EXPECT_EQ(error_of([] { parse_data_paths({"0.5", "0.5"}); }),
            "data.paths: entry 1 should be a prefix, got the number 0.5");
  EXPECT_EQ(error_of([] { parse_data_paths({"data/a", "0.5", "data/b"}); }),
            "data.paths: \"0.5\" is a weight in a list of prefixes; give a weight before every "
            "prefix (\"0.7\", \"data/a\", \"0.3\", \"data/b\") or none");
}

// Two datasets told apart by their ids: a holds ids below 1000, b ids from 1000 on.
class BlendedDatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) /
           ("kiln_blend_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    write(a(), 0, 300);    // 300 tokens
    write(b(), 1000, 100);  // 100 tokens
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string a() const { return (dir_ / "a").string(); }
  std::string b() const { return (dir_ / "b").string(); }

  void write(const std::string& prefix, int32_t first_id, int tokens) {
    fs::create_directories(dir_);
    IndexedDatasetWriter writer(prefix, 100000);
    for (int d = 0; d < tokens / 10; ++d) {
      std::vector<int32_t> doc(10);
      std::iota(doc.begin(), doc.end(), first_id + 10 * d);
      writer.add_document(doc);
    }
    writer.finish();
  }

  // How many of the first n samples come from a.
  static int64_t from_a(const SampleSource& data, int64_t n) {
    std::vector<int32_t> out(5);
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      data.sample(i, out.data());
      count += out[0] < 1000;
      for (int32_t id : out) EXPECT_EQ(id < 1000, out[0] < 1000) << "a sample mixes datasets";
    }
    return count;
  }

  GptDatasetSpec spec(int64_t samples) const {
    GptDatasetSpec s;
    s.split = "1";
    s.num_samples = samples;
    s.seq_len = 4;
    s.seed = 9;
    return s;
  }

  fs::path dir_;
};

TEST_F(BlendedDatasetTest, WeightsSetTheMix) {
  const auto blend = open_samples({"0.2", a(), "0.8", b()}, spec(500));
  EXPECT_EQ(blend->num_samples(), 500);
  EXPECT_EQ(from_a(*blend, 500), 100);  // the greedy rule keeps every prefix on its share
  EXPECT_EQ(from_a(*blend, 50), 10);
  EXPECT_EQ(blend->num_tokens(), 400);
  EXPECT_EQ(blend->max_token_id(), 1099);
  // b's 0.8 x 500 samples and half a percent more need 17 epochs of its 100 tokens, which
  // hold (1700 - 1) / 4 = 424 samples.
  EXPECT_NE(blend->describe().find("0.8 x " + b() + " train: 10 documents, 100 tokens, 424 samples over 17 epochs"),
            std::string::npos)
      << blend->describe();
}

TEST_F(BlendedDatasetTest, WithoutWeightsTheSplitsTokensSetTheMix) {
  const auto blend = open_samples({a(), b()}, spec(400));
  EXPECT_EQ(from_a(*blend, 400), 300);  // 300 tokens against 100
}

TEST_F(BlendedDatasetTest, ASinglePrefixIsAPlainGptDataset) {
  const auto one = open_samples({a()}, spec(10));
  EXPECT_NE(dynamic_cast<const GptDataset*>(one.get()), nullptr);
  EXPECT_EQ(from_a(*one, 10), 10);
}

TEST_F(BlendedDatasetTest, IsCachedAndDeterministic) {
  std::vector<int32_t> first(5), again(5);
  open_samples({"0.5", a(), "0.5", b()}, spec(50))->sample(37, first.data());
  open_samples({"0.5", a(), "0.5", b()}, spec(50))->sample(37, again.data());
  EXPECT_EQ(first, again);
  int blend_files = 0;
  for (const auto& entry : fs::directory_iterator(dir_ / "cache"))
    blend_files += entry.path().filename().string().rfind("blend-", 0) == 0;
  EXPECT_EQ(blend_files, 3);  // dataset_index, dataset_sample_index, description
}

// A damaged blend cache is built again, with the note docs/data.md promises, and gives the
// same samples.
TEST_F(BlendedDatasetTest, ADamagedBlendCacheIsBuiltAgainWithANote) {
  std::vector<int32_t> first(5), again(5);
  open_samples({"0.5", a(), "0.5", b()}, spec(50))->sample(37, first.data());
  for (const auto& entry : fs::directory_iterator(dir_ / "cache")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("blend-", 0) == 0 && name.find("dataset_sample_index.npy") != std::string::npos)
      fs::resize_file(entry.path(), fs::file_size(entry.path()) - 16);
  }
  char* text = nullptr;
  size_t size = 0;
  std::FILE* log = open_memstream(&text, &size);
  open_samples({"0.5", a(), "0.5", b()}, spec(50), log)->sample(37, again.data());
  std::fclose(log);
  const std::string printed(text, size);
  std::free(text);
  EXPECT_EQ(first, again);
  EXPECT_NE(printed.find("kiln: data: rebuilding a damaged index cache ("), std::string::npos) << printed;
  EXPECT_NE(printed.find("kiln: data train: built the blend of 2 datasets, 50 samples"), std::string::npos)
      << printed;
}

}  // namespace
}  // namespace kiln
