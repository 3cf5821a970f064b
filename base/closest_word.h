// The name a typo most likely meant, for "(did you mean ...?)" after an unknown config key, a
// command or anything else the user names from a known list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Levenshtein distance: the single-character insertions, deletions and substitutions that
// turn a into b.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate `word` most likely meant, or "" when none is close enough to suggest: within
// a third of the longer name's letters (plus one), or holding it, or held by it. Among equally
// close candidates one that holds the word (or is held by it) wins, then the first.
std::string closest_word(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean SUGGESTION?)", or "" for no suggestion.
std::string did_you_mean(const std::string& suggestion);

}  // namespace kiln
