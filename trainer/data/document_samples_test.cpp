// Whole-document samples (data.samples=packed|padded): what each sample holds, its mask and its
// padding, documents cut to the window, epochs, and the order from the seed.
#include "trainer/data/document_samples.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/error_of.h"
#include "tests/test_files.h"
#include "trainer/data/loss_mask.h"

namespace kiln {
namespace {

constexpr int32_t kPad = 0;

// Documents 1..5 of lengths 3, 5, 2, 9, 4, whose tokens are 10 * document + position, and,
// when `masked`, a mask that trains each document's last two tokens.
std::string write_documents(const std::string& name, bool masked) {
  const std::string prefix = test::fresh_dir(name) + "/chats";
  IndexedDatasetWriter tokens(prefix, 100), mask(loss_mask_prefix(prefix), 2);
  const int lengths[] = {3, 5, 2, 9, 4};
  for (int d = 0; d < 5; ++d) {
    std::vector<int32_t> ids, flags;
    for (int i = 0; i < lengths[d]; ++i) {
      ids.push_back(10 * (d + 1) + i);
      flags.push_back(i >= lengths[d] - 2 ? 1 : 0);
    }
    tokens.add_document(ids);
    mask.add_document(flags);
  }
  if (masked) mask.finish();
  tokens.finish();
  return prefix;
}

DocumentSamplesSpec spec_of(const std::string& prefix, bool pack, int64_t samples = 0) {
  DocumentSamplesSpec spec;
  spec.prefix = prefix;
  spec.split = "100";
  spec.seq_len = 7;  // windows of 8 tokens
  spec.num_samples = samples;
  spec.seed = 3;
  spec.pack = pack;
  spec.pad = kPad;
  return spec;
}

std::vector<int32_t> window_of(const SampleSource& data, int64_t i, bool mask = false) {
  std::vector<int32_t> out(8);
  if (mask) {
    data.loss_mask(i, out.data());
  } else {
    data.sample(i, out.data());
  }
  return out;
}

// The documents a window holds, from their tokens (10 * document + position).
std::vector<int> documents_in(const std::vector<int32_t>& window) {
  std::vector<int> out;
  for (size_t i = 0; i < window.size(); ++i)
    if (window[i] != kPad && (i == 0 || window[i] / 10 != window[i - 1] / 10)) out.push_back(window[i] / 10);
  return out;
}

TEST(DocumentSamples, PackedSamplesHoldWholeDocumentsThenPadding) {
  const DocumentSamples data(spec_of(write_documents("packed", true), true));
  std::multiset<int> seen;
  int64_t real = 0;
  for (int64_t i = 0; i < data.num_samples(); ++i) {
    const std::vector<int32_t> window = window_of(data, i), mask = window_of(data, i, true);
    for (size_t t = 0; t < window.size(); ++t) {
      // Padding is never trained.
      if (window[t] == kPad) {
        EXPECT_EQ(mask[t], 0);
      } else {
        ++real;
      }
    }
    for (int d : documents_in(window)) seen.insert(d);
    // Packing fills greedily: the next sample's first document would not have fit here.
    if (i + 1 < data.num_samples()) {
      const std::vector<int32_t> next = window_of(data, i + 1);
      const int64_t used = std::count_if(window.begin(), window.end(), [](int32_t t) { return t != kPad; });
      const int first_next = next[0] / 10;
      const int lengths[] = {3, 5, 2, 9, 4};
      EXPECT_GT(used + std::min(lengths[first_next - 1], 8), 8) << "sample " << i;
    }
  }
  // One epoch: every document once; document 4 (9 tokens) cut to the window's 8.
  EXPECT_EQ(seen, (std::multiset<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(real, 3 + 5 + 2 + 8 + 4);
  EXPECT_NE(data.describe().find("1 documents cut to seq_len + 1"), std::string::npos) << data.describe();
}

TEST(DocumentSamples, TheMaskIsTheDatasetsAndWithoutOneEveryRealTokenTrains) {
  const std::string masked = write_documents("mask", true), bare = write_documents("bare", false);
  const DocumentSamples with(spec_of(masked, false)), without(spec_of(bare, false));
  ASSERT_EQ(with.num_samples(), 5);
  for (int64_t i = 0; i < 5; ++i) {
    const std::vector<int32_t> window = window_of(with, i), mask = window_of(with, i, true);
    const std::vector<int32_t> bare_mask = window_of(without, i, true);
    const int lengths[] = {3, 5, 2, 9, 4};
    const int length = lengths[window[0] / 10 - 1];  // the document's, before a cut
    for (int t = 0; t < 8; ++t) {
      // The dataset's mask trains each document's last two tokens; padding never trains.
      EXPECT_EQ(mask[static_cast<size_t>(t)], t < length && t >= length - 2 ? 1 : 0) << i << " " << t;
      EXPECT_EQ(bare_mask[static_cast<size_t>(t)], t < length ? 1 : 0) << i << " " << t;
    }
    // Padded: one document a sample.
    EXPECT_EQ(documents_in(window).size(), 1u);
  }
}

TEST(DocumentSamples, EpochsFollowInANewOrderFromTheSeed) {
  const std::string prefix = write_documents("epochs", true);
  const DocumentSamples data(spec_of(prefix, false, 12)), again(spec_of(prefix, false, 12));
  DocumentSamplesSpec other_seed = spec_of(prefix, false, 12);
  other_seed.seed = 4;
  const DocumentSamples other(other_seed);
  EXPECT_EQ(data.num_samples(), 15);  // three epochs of five
  std::vector<int> order, order_again, order_other;
  for (int64_t i = 0; i < 15; ++i) {
    order.push_back(documents_in(window_of(data, i))[0]);
    order_again.push_back(documents_in(window_of(again, i))[0]);
    order_other.push_back(documents_in(window_of(other, i))[0]);
  }
  EXPECT_EQ(order, order_again);
  EXPECT_NE(order, order_other);
  for (int e = 0; e < 3; ++e)
    EXPECT_EQ(std::multiset<int>(order.begin() + 5 * e, order.begin() + 5 * e + 5), (std::multiset<int>{1, 2, 3, 4, 5}));
  EXPECT_NE(std::vector<int>(order.begin(), order.begin() + 5), std::vector<int>(order.begin() + 5, order.begin() + 10));
}

TEST(DocumentSamples, AMaskThatDoesNotMatchItsDataIsRefused) {
  const std::string prefix = test::fresh_dir("mismatch") + "/chats";
  {
    IndexedDatasetWriter tokens(prefix, 100), mask(loss_mask_prefix(prefix), 2);
    tokens.add_document(std::vector<int32_t>{1, 2, 3});
    mask.add_document(std::vector<int32_t>{0, 1});
    mask.finish();
    tokens.finish();
  }
  EXPECT_EQ(test::error_of([&] { DocumentSamples data(spec_of(prefix, true)); }),
            "data: the loss mask " + prefix + ".mask does not match " + prefix +
                " (1 documents and 2 tokens against 1 and 3); prepare the data again");
}

}  // namespace
}  // namespace kiln
