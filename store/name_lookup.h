// What resolving a run or a sweep by what the user typed (an id, a name, a prefix) shares:
// telling an id from a name, and naming the candidates of an ambiguous or unknown one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "store/database.h"

namespace kiln::store {

// Names are never all digits (check_run_name, the sweep's checks), so such text is an id.
inline bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "a (id 1), b (id 2)" for the first `limit` rows of (id, name) the statement yields, and how
// many more there were.
inline std::string candidates(Statement& st, size_t limit) {
  std::string text;
  size_t n = 0;
  while (st.step())
    if (n++ < limit) text += (text.empty() ? "" : ", ") + st.text(1) + " (id " + std::to_string(st.int64(0)) + ")";
  if (n > limit) text += ", and " + std::to_string(n - limit) + " more";
  return text;
}

}  // namespace kiln::store
