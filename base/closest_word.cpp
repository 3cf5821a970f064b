#include "base/closest_word.h"

#include <algorithm>

namespace kiln {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_word(std::string_view word, const std::vector<std::string>& candidates) {
  const auto contains = [](std::string_view a, std::string_view b) {
    return (b.size() >= 2 && a.find(b) != a.npos) || (a.size() >= 2 && b.find(a) != b.npos);
  };
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    const bool better = !best || d < best_distance ||
                        (d == best_distance && contains(word, c) && !contains(word, *best));
    if (better) {
      best = &c;
      best_distance = d;
    }
  }
  if (!best) return "";
  const bool close = best_distance <= std::max(word.size(), best->size()) / 3 + 1;
  return close || contains(word, *best) ? *best : "";
}

std::string did_you_mean(const std::string& suggestion) {
  return suggestion.empty() ? "" : " (did you mean " + suggestion + "?)";
}

}  // namespace kiln
