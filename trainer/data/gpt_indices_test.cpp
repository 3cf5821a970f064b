// The index builders on cases small enough to work out by hand. tests/megatron_indices_test.cpp
// compares them, at scale, with a transcription of Megatron's builders that draws from
// numpy itself.
#include "trainer/data/gpt_indices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

TEST(NumpyRandomState, ShufflesAsNumpysRandomStateDoes) {
  // numpy 1.24: r = numpy.random.RandomState(1234); a = numpy.arange(10); r.shuffle(a)
  NumpyRandomState r(1234);
  std::vector<int32_t> a(10);
  std::iota(a.begin(), a.end(), 0);
  r.shuffle(std::span<int32_t>(a));
  EXPECT_EQ(a, (std::vector<int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  // One generator goes on drawing: r = RandomState(0); shuffle(arange(6)); shuffle(arange(6, 9))
  NumpyRandomState zero(0);
  std::vector<int64_t> first{0, 1, 2, 3, 4, 5}, second{6, 7, 8};
  zero.shuffle(std::span<int64_t>(first));
  zero.shuffle(std::span<int64_t>(second));
  EXPECT_EQ(first, (std::vector<int64_t>{5, 2, 1, 3, 0, 4}));
  EXPECT_EQ(second, (std::vector<int64_t>{8, 6, 7}));
  EXPECT_EQ(test::error_of([] { NumpyRandomState big(uint64_t{1} << 32); }),
            "data: seed 4294967296 is outside [0, 2^32 - 1], the seeds numpy (and so Megatron's "
            "dataset order) accepts");
}

TEST(PlanEpochs, CountsEpochsAndKeepsAShortFinalEpochApart) {
  // 30 tokens an epoch, seq_len 4: an epoch holds (30 - 1) / 4 = 7 samples.
  EpochPlan one = plan_epochs(30, 7, 4);
  EXPECT_EQ(one.num_epochs, 1);
  EXPECT_FALSE(one.separate_final_epoch);
  // 8 samples need 33 tokens: a second epoch, of which 1 sample is used, fewer than
  // int(0.8 * 7) = 5, so it is shuffled on its own.
  EpochPlan tail = plan_epochs(30, 8, 4);
  EXPECT_EQ(tail.num_epochs, 2);
  EXPECT_TRUE(tail.separate_final_epoch);
  EXPECT_EQ(tail.samples_before_final_epoch, 7);
  // 13 samples use 6 of the second epoch's: mixed with the first.
  EpochPlan most = plan_epochs(30, 13, 4);
  EXPECT_EQ(most.num_epochs, 2);
  EXPECT_FALSE(most.separate_final_epoch);
}

TEST(DocumentIndex, RepeatsEveryDocumentOncePerEpoch) {
  const std::vector<int32_t> documents{4, 5, 6};
  NumpyRandomState rng(3);
  const std::vector<int32_t> index = build_document_index(documents, plan_epochs(9, 10, 2), rng);
  ASSERT_EQ(index.size(), 9u);  // 10 samples of 2 need 21 tokens: 3 epochs of 9
  for (int32_t d : documents) EXPECT_EQ(std::count(index.begin(), index.end(), d), 3);
}

TEST(SampleIndex, WalksSeqLenTokensAcrossDocuments) {
  // Documents of 3, 2 and 4 tokens in that order, seq_len 2: (9 - 1) / 2 = 4 samples.
  EpochPlan plan = plan_epochs(9, 4, 2);
  EXPECT_EQ(build_sample_index(std::vector<int64_t>{3, 2, 4}, std::vector<int32_t>{0, 1, 2}, plan, 2),
            (std::vector<int64_t>{0, 0, 0, 2, 1, 1, 2, 1, 2, 3}));
  // An empty document is stepped over; a window may end on a document's last token.
  plan = plan_epochs(7, 2, 3);
  EXPECT_EQ(build_sample_index(std::vector<int64_t>{3, 0, 4}, std::vector<int32_t>{0, 1, 2}, plan, 3),
            (std::vector<int64_t>{0, 0, 2, 0, 2, 3}));
}

TEST(ShuffleIndex, ShufflesTheFinalEpochApart) {
  const EpochPlan tail = plan_epochs(30, 8, 4);  // 14 samples, the first 7 from epoch one
  NumpyRandomState rng(5);
  const std::vector<int64_t> order = build_shuffle_index(14, tail, rng);
  ASSERT_EQ(order.size(), 14u);
  for (size_t i = 0; i < 14; ++i)
    EXPECT_EQ(order[i] < 7, i < 7) << "position " << i << " holds " << order[i];
}

TEST(BlendingIndices, FollowMegatronsGreedyRule) {
  // Worked by hand: each sample goes to the dataset furthest behind weight x max(i, 1).
  std::vector<int16_t> dataset;
  std::vector<int64_t> sample;
  build_blending_indices(std::vector<double>{0.5, 0.3, 0.2}, 10, dataset, sample);
  EXPECT_EQ(dataset, (std::vector<int16_t>{0, 1, 2, 0, 1, 0, 2, 0, 1, 0}));
  EXPECT_EQ(sample, (std::vector<int64_t>{0, 0, 0, 1, 1, 2, 1, 3, 2, 4}));
}

}  // namespace
}  // namespace kiln
