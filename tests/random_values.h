// Random test inputs every test tier shares.
#pragma once

#include <random>
#include <vector>

namespace rf::test {

// n values from N(0, scale^2).
inline std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace rf::test
