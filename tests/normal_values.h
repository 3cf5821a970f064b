// `n` values drawn from N(0, std^2), the same for a seed on every machine's libstdc++: test
// inputs for the ops and layers (kernels/cpu/fp8_test.cpp, trainer/precision/fp8_products_test.cpp).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::test {

inline std::vector<float> normal_values(int64_t n, float std, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0, std);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace kiln::test
