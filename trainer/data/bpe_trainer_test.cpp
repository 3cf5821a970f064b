#include "trainer/data/bpe_trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/check.h"
#include "tests/random_words.h"
#include "trainer/data/bpe_tokenizer.h"

namespace kiln {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

// The slow, obvious trainer: recount every pair of every piece before each merge, with the
// same tie rule (the lower left id, then the lower right id).
Merges recounting_trainer(const std::map<std::string, int64_t>& pieces, int merges_wanted,
                          int64_t min_frequency) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [piece, count] : pieces) {
    std::vector<int32_t> s;
    for (const char c : piece) s.push_back(static_cast<unsigned char>(c));
    words.emplace_back(s, count);
  }
  Merges merges;
  while (static_cast<int>(merges.size()) < merges_wanted) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (const auto& [s, count] : words)
      for (size_t i = 0; i + 1 < s.size(); ++i) counts[{s[i], s[i + 1]}] += count;
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [pair, count] : counts)  // in (left, right) order: the first max wins ties
      if (count > best_count) best = pair, best_count = count;
    if (best_count == 0 || best_count < min_frequency) break;
    const std::string bytes =
        tokens[static_cast<size_t>(best.first)] + tokens[static_cast<size_t>(best.second)];
    const auto found = std::find(tokens.begin(), tokens.end(), bytes);
    const auto id = static_cast<int32_t>(found - tokens.begin());
    if (found == tokens.end()) tokens.push_back(bytes);
    merges.emplace_back(tokens[static_cast<size_t>(best.first)],
                        tokens[static_cast<size_t>(best.second)]);
    for (auto& [s, count] : words) {
      std::vector<int32_t> merged;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == best.first && s[i + 1] == best.second) {
          merged.push_back(id);
          ++i;
        } else {
          merged.push_back(s[i]);
        }
      }
      s = merged;
    }
  }
  return merges;
}

std::string varied_text(int words, unsigned seed) {
  const std::vector<std::string> vocabulary = {
      "the",    "then", "there", "these", "and", "an",          "ant",
      "and'll", "it's", "we'll", "12",    "123", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
      "hello",  "help", "held",  "!!",    "?",   "..."};
  return test::random_words(vocabulary, words, seed);
}

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  BpeTrainer trainer;
  trainer.add_text("ab ab ab cd cd");  // pieces: "ab" once, " ab" twice, " cd" twice
  std::vector<int64_t> counts;
  const BpeModel model =
      trainer.train({300, 1}, [&](const BpeTrainProgress& p) { counts.push_back(p.count); });
  // (a, b) is seen 3 times. Then (' ', 'c'), (' ', ab) and (c, d) twice each: the lowest
  // ids go first, (32, 99) before (32, 256); then (' ', ab) before (" c", d).
  EXPECT_EQ(model.merges, (Merges{{"a", "b"}, {" ", "c"}, {" ", "ab"}, {" c", "d"}}));
  EXPECT_EQ(counts, (std::vector<int64_t>{3, 2, 2, 2}));
  // It ran out of pairs: 256 bytes, 4 merges and the end of document.
  EXPECT_EQ(model.tokens.size(), 260u);
  EXPECT_EQ(model.eod, 260);
  ASSERT_EQ(model.specials.size(), 1u);
  EXPECT_EQ(model.specials[0].text, "<|endoftext|>");
}

TEST(BpeTrainer, MatchesRecountingEveryPairEachTime) {
  const std::string text = varied_text(3000, 1);
  BpeTrainer trainer;
  trainer.add_text(text);
  std::vector<int64_t> counts;
  const BpeModel model = trainer.train(
      {256 + 120 + 1, 2}, [&](const BpeTrainProgress& p) { counts.push_back(p.count); });

  const Pretokenizer pre;
  std::vector<size_t> ends;
  pre.split(text, ends);
  std::map<std::string, int64_t> pieces;
  size_t begin = 0;
  for (const size_t end : ends) ++pieces[text.substr(begin, end - begin)], begin = end;
  EXPECT_EQ(model.merges, recounting_trainer(pieces, 120, 2));
  EXPECT_TRUE(std::is_sorted(counts.rbegin(), counts.rend())) << "merges come in frequency order";
}

TEST(BpeTrainer, TrainedTokenizerRoundTrips) {
  BpeTrainer trainer;
  trainer.add_text(varied_text(5000, 2));
  const BpeTokenizer t(trainer.train({300, 2}), "trained");
  EXPECT_EQ(t.vocab_size(), 300);
  EXPECT_EQ(t.eod(), 299);
  const std::string held_out =
      varied_text(500, 3) + " unseen w\xc3\xb6rds \xf0\x9f\x8e\x89 <|endoftext|>";
  const std::vector<int32_t> ids = t.encode(held_out);
  EXPECT_EQ(t.decode(ids), held_out);
  EXPECT_LT(ids.size(), held_out.size() / 2);
}

TEST(BpeTrainer, MinFrequencyStopsEarly) {
  BpeTrainer trainer;
  trainer.add_text("ab cd ab");  // (a, b) is seen twice: in "ab" and " ab"
  const BpeModel model = trainer.train({1000, 3});
  EXPECT_TRUE(model.merges.empty()) << "no pair is seen 3 times";
  EXPECT_EQ(model.eod, 256);
  EXPECT_THROW(trainer.train({256, 1}), Error);
}

TEST(BpeTrainer, FilesAreReadInChunksAsIfWhole) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "kiln_bpe_trainer";
  std::filesystem::create_directories(dir);
  const std::string text = varied_text(600000, 4);  // about 3 MiB: several read chunks
  ASSERT_GT(text.size(), size_t{2} << 20);
  std::ofstream((dir / "corpus.txt").string(), std::ios::binary) << text;

  BpeTrainer from_file, from_text;
  from_file.add_file((dir / "corpus.txt").string());
  from_text.add_text(text);
  EXPECT_EQ(from_file.pieces(), from_text.pieces());
  EXPECT_EQ(from_file.distinct_pieces(), from_text.distinct_pieces());
  EXPECT_EQ(from_file.train({300, 2}).merges, from_text.train({300, 2}).merges);

  std::ofstream((dir / "bad.txt").string(), std::ios::binary)
      << "fine\n"
      << std::string(3000000, 'x') << "\xff";
  try {
    BpeTrainer t;
    t.add_file((dir / "bad.txt").string());
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt: not valid UTF-8 at byte 3000005"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln
