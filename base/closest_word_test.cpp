#include "base/closest_word.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(ClosestWord, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("train", "train"), 0u);
  EXPECT_EQ(edit_distance("trian", "train"), 2u);  // a swap is two substitutions
  EXPECT_EQ(edit_distance("shw", "show"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(ClosestWord, SuggestsTheNearestCandidateOnlyWhenItIsClose) {
  const std::vector<std::string> commands = {"train", "data", "tokenizer", "generate", "eval", "export",
                                             "import", "runs", "plan", "sweep", "serve", "tui"};
  EXPECT_EQ(closest_word("trian", commands), "train");
  EXPECT_EQ(closest_word("serv", commands), "serve");
  EXPECT_EQ(closest_word("exprot", commands), "export");
  EXPECT_EQ(closest_word("nosuch", commands), "");
  EXPECT_EQ(closest_word("x", {}), "");
  // A candidate that holds the word beats another as near: n_heads is model.n_head's.
  EXPECT_EQ(closest_word("n_heads", {"n_embd", "n_head"}), "n_head");
  EXPECT_EQ(closest_word("tokenize", commands), "tokenizer");
}

TEST(ClosestWord, DidYouMeanIsEmptyWithoutASuggestion) {
  EXPECT_EQ(did_you_mean("train"), " (did you mean train?)");
  EXPECT_EQ(did_you_mean(""), "");
}

}  // namespace
}  // namespace kiln
