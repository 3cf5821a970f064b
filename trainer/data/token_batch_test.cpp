#include "trainer/data/token_batch.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/error_of.h"

namespace kiln {
namespace {

constexpr int32_t kEod = 0;

// Always the same window of 9 tokens: the end of one document (7, 0), a whole document
// (5, 6, 0) and the start of the next (8, 9, 3, 4).
class FixedSamples : public SampleSource {
 public:
  int64_t num_samples() const override { return 2; }
  void sample(int64_t, int32_t* out) const override {
    const int32_t window[] = {7, 0, 5, 6, 0, 8, 9, 3, 4};
    std::copy(std::begin(window), std::end(window), out);
  }
  int64_t num_tokens() const override { return 9; }
  int32_t max_token_id() const override { return 9; }
  std::string describe() const override { return "fixed"; }
};

// The same window with a loss mask: a prompt (7, 0, 5) and its reply (6, 0), then context.
class MaskedSamples : public FixedSamples {
 public:
  bool has_loss_mask() const override { return true; }
  void loss_mask(int64_t, int32_t* out) const override {
    const int32_t mask[] = {0, 0, 0, 1, 1, 0, 0, 0, 0};
    std::copy(std::begin(mask), std::end(mask), out);
  }
};

std::vector<int32_t> row(const int32_t* values) { return {values, values + 8}; }

TEST(TokenBatch, InputsAndTargetsAreTheWindowShiftedByOne) {
  TokenBatch batch({kEod});
  batch.fill(FixedSamples(), 0, 2, 8);
  EXPECT_EQ(row(batch.tokens()), (std::vector<int32_t>{7, 0, 5, 6, 0, 8, 9, 3}));
  EXPECT_EQ(row(batch.targets() + 8), (std::vector<int32_t>{0, 5, 6, 0, 8, 9, 3, 4}));
  EXPECT_EQ(batch.positions(), nullptr);
  EXPECT_EQ(batch.attention_starts(), nullptr);
}

TEST(TokenBatch, EodMaskLossDropsThePredictionsMadeFromTheEndOfDocument) {
  TokenBatch batch({kEod, /*eod_mask_loss=*/true});
  batch.fill(FixedSamples(), 0, 1, 8);
  // Inputs 0 at columns 1 and 4: their targets (5 and 8, the next documents' first tokens)
  // carry no loss; predicting the end of document itself still does.
  EXPECT_EQ(row(batch.targets()), (std::vector<int32_t>{0, -1, 6, 0, -1, 9, 3, 4}));
}

TEST(TokenBatch, ALossMaskTrainsOnlyTheTargetsItMarks) {
  TokenBatch batch({kEod});
  batch.fill(MaskedSamples(), 0, 2, 8);
  // Target i is window token i + 1: trained where the mask marks that token (6 and its EOD).
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(row(batch.targets() + 8 * r), (std::vector<int32_t>{-1, -1, 6, 0, -1, -1, -1, -1}));
  EXPECT_EQ(batch.trained_targets(), 4);
  // With eod_mask_loss too, each rule masks its own targets.
  TokenBatch both({kEod, /*eod_mask_loss=*/true});
  both.fill(MaskedSamples(), 0, 1, 8);
  EXPECT_EQ(row(both.targets()), (std::vector<int32_t>{-1, -1, 6, 0, -1, -1, -1, -1}));
  TokenBatch unmasked({kEod});
  unmasked.fill(FixedSamples(), 0, 1, 8);
  EXPECT_EQ(unmasked.trained_targets(), 8);
}

TEST(TokenBatch, ResetsRestartPositionsAndAttentionAfterEachEndOfDocument) {
  TokenBatch batch({kEod, false, /*reset_position_ids=*/true, /*reset_attention_mask=*/true});
  batch.fill(FixedSamples(), 0, 2, 8);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(row(batch.positions() + 8 * r), (std::vector<int32_t>{0, 1, 0, 1, 2, 0, 1, 2}));
    EXPECT_EQ(row(batch.attention_starts() + 8 * r), (std::vector<int32_t>{0, 0, 2, 2, 2, 5, 5, 5}));
  }
  TokenBatch positions_only({kEod, false, true, false});
  positions_only.fill(FixedSamples(), 0, 1, 8);
  EXPECT_NE(positions_only.positions(), nullptr);
  EXPECT_EQ(positions_only.attention_starts(), nullptr);
}

TEST(TokenBatch, OptionsThatNeedAnEndOfDocumentRefuseATokenizerWithout) {
  EXPECT_EQ(test::error_of([] { TokenBatch batch({-1, true}); }),
            "data.eod_mask_loss, data.reset_position_ids and data.reset_attention_mask need a "
            "tokenizer with an end-of-document token");
  EXPECT_EQ(test::error_of([] { TokenBatch batch({-1}); }), "(no error)");
}

}  // namespace
}  // namespace kiln
