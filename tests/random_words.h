// Test text: words drawn from a vocabulary, joined by spaces, commas, line ends, blank lines
// (document breaks for --document-boundary blank-line) and tabs. Seeded, so a test's text is
// the same on every run.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace kiln::test {

inline std::string random_words(const std::vector<std::string>& vocabulary, int words,
                                unsigned seed) {
  const std::vector<std::string> separators = {" ", " ", " ", ", ", ".\n", "\n\n", "  ", "\t"};
  std::mt19937 rng(seed);
  std::string text;
  for (int i = 0; i < words; ++i)
    text += vocabulary[rng() % vocabulary.size()] + separators[rng() % separators.size()];
  return text;
}

}  // namespace kiln::test
