// kiln's GPT-dataset and blending indices against tests/parity/megatron_indices.py, which
// builds them in numpy the way Megatron-LM does, drawing from numpy.random.RandomState: for
// one seed, split and sample count, kiln must train on Megatron's very samples in Megatron's
// order. The Python side reads the .idx file on its own, so the data reader is checked too.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/run_command.h"
#include "trainer/data/blended_dataset.h"
#include "trainer/data/gpt_dataset.h"
#include "trainer/data/gpt_indices.h"
#include "trainer/data/npy_file.h"
#include "trainer/util/random.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(KILN_SOURCE_DIR) + "/tests/parity/megatron_indices.py";

template <typename T>
std::vector<int64_t> values_of(const std::string& path) {
  const NpyArray array = NpyArray::open<T>(path);
  const auto v = array.values<T>();
  return {v.begin(), v.end()};
}

struct Case {
  int64_t num_samples;
  int seq_len;
  uint64_t seed;
  std::string what;
};

class MegatronIndices : public testing::TestWithParam<Case> {};

TEST_P(MegatronIndices, GptDatasetIndicesEqualMegatrons) {
  const Case c = GetParam();
  const std::string dir = test::fresh_dir("megatron_indices");
  // 300 documents of 0 to 199 tokens (a few empty): the train split "90,10" is 270 of them.
  const std::string prefix = dir + "/corpus";
  {
    IndexedDatasetWriter writer(prefix, 50000);
    Random pick(42);
    for (int d = 0; d < 300; ++d) {
      std::vector<int32_t> doc(pick.below(200));
      for (auto& t : doc) t = static_cast<int32_t>(pick.below(50000));
      writer.add_document(doc);
    }
    writer.finish();
  }
  GptDatasetSpec spec;
  spec.prefix = prefix;
  spec.split = "90,10";
  spec.num_samples = c.num_samples;
  spec.seq_len = c.seq_len;
  spec.seed = c.seed;
  const GptDataset ours(spec);

  const std::vector<int64_t> bounds = split_boundaries(spec.split, 300);
  const test::CommandResult r = test::run_command(
      "/usr/bin/python3 " + kScript + " gpt " + prefix + " " + std::to_string(bounds[0]) + " " +
      std::to_string(bounds[1]) + " " + std::to_string(c.num_samples) + " " +
      std::to_string(c.seq_len) + " " + std::to_string(c.seed) + " " + dir + "/megatron");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(values_of<int32_t>(ours.cache_stem() + "document_index.npy"),
            values_of<int32_t>(dir + "/megatron-document_index.npy"));
  EXPECT_EQ(values_of<int64_t>(ours.cache_stem() + "sample_index.npy"),
            values_of<int64_t>(dir + "/megatron-sample_index.npy"));
  EXPECT_EQ(values_of<int64_t>(ours.cache_stem() + "shuffle_index.npy"),
            values_of<int64_t>(dir + "/megatron-shuffle_index.npy"));
}

// The train split holds 27702 tokens. One epoch; five epochs with 369 of the last epoch's
// 432 samples of 64 used (over 80%: shuffled with the rest); four with 1000 - 831 of the
// last's 277 samples of 100 used (under 80%: shuffled apart).
INSTANTIATE_TEST_SUITE_P(Plans, MegatronIndices,
                         testing::Values(Case{100, 128, 1234, "one_epoch"},
                                         Case{2100, 64, 7, "mixed_final_epoch"},
                                         Case{1000, 100, 99, "separate_final_epoch"}),
                         [](const auto& info) { return info.param.what; });

TEST(MegatronBlend, BlendingIndicesEqualMegatrons) {
  const std::string dir = test::fresh_dir("megatron_blend");
  std::vector<int16_t> dataset;
  std::vector<int64_t> sample;
  const std::vector<double> weights{0.5, 0.25, 0.125, 0.125};
  build_blending_indices(weights, 5000, dataset, sample);
  const test::CommandResult r = test::run_command("/usr/bin/python3 " + kScript +
                                                  " blend 0.5,0.25,0.125,0.125 5000 " + dir + "/m");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(std::vector<int64_t>(dataset.begin(), dataset.end()),
            values_of<int16_t>(dir + "/m-dataset_index.npy"));
  EXPECT_EQ(sample, values_of<int64_t>(dir + "/m-dataset_sample_index.npy"));
}

}  // namespace
}  // namespace kiln
