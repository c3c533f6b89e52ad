// Counter-based random numbers: a draw is a pure function of (seed, counter),
// so a sequence samples the same tokens on any backend and in any batch.
// Usable from host and device code.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace rf {

RF_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform float in [0, 1) with 24 random bits.
RF_HOST_DEVICE inline float uniform01(uint64_t seed, uint64_t counter) {
  const uint64_t h = splitmix64(splitmix64(seed) ^ (counter * 0xd1342543de82ef95ull + 0x632be59bd9b4e019ull));
  return float(uint32_t(h >> 40)) * (1.0f / 16777216.0f);
}

}  // namespace rf
