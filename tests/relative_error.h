// ||got - want|| / ||want||: how far a result is from its reference, as one number over the
// whole tensor (0 when equal; the floor on ||want|| keeps an all-zero reference finite).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::test {

inline double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

}  // namespace kiln::test
