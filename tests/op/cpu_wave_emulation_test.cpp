// The sub-group collectives of src/backend/cuda/wave.h (what warp_sum,
// warp_max, block_sum, block_max and the samplers' argmax run in every
// kernel) on emulated hardware: a block of threads, one per lane, whose
// shuffles exchange values in lockstep through a barrier. Hardware widths 64
// (CDNA wavefronts) and 32 (NVIDIA, RDNA), with reductions as wide as the
// hardware and narrower (attention decode's 32-lane groups inside a 64-wide
// wavefront), against plain loops. This is how the wave64 code paths are
// tested on machines without an AMD GPU; it checks the collectives' logic,
// not a compiler's code for them.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "backend/cuda/wave.h"
#include "op/emulated_block.h"

namespace rf::gpu {
namespace {

std::vector<float> random_values(int n, unsigned seed, int distinct) {
  std::mt19937 rng(seed);
  std::vector<float> v(size_t(n), 0.0f);
  for (auto& x : v) x = float(int(rng() % unsigned(distinct)) - distinct / 2);  // small integers: exact sums, ties
  return v;
}

// Each sub-group of W lanes (inside warps of hw lanes) sums and takes the max
// of its lanes' values; every lane gets its sub-group's result.
template <int W>
void check_subgroup_reductions(int threads, int hw) {
  const auto in = random_values(threads, 7 + W + hw, 9);
  const size_t n = size_t(threads);
  std::vector<float> sums(n), maxes(n), arg_v(n);
  std::vector<int> arg_i(n);
  EmulatedBlock block(threads, hw);
  block.run([&](EmulatedBlock::Lanes& x) {
    const float v = in[size_t(x.tid)];
    sums[size_t(x.tid)] = wave::sum<W>(v, x);
    maxes[size_t(x.tid)] = wave::max<W>(v, x);
    float bv = v;
    int bi = x.tid;
    wave::argmax<W>(bv, bi, x);
    arg_v[size_t(x.tid)] = bv;
    arg_i[size_t(x.tid)] = bi;
  });
  for (int t = 0; t < threads; ++t) {
    const int g0 = t / W * W;  // this lane's sub-group
    float s = 0.0f, mx = -std::numeric_limits<float>::infinity();
    int best = g0;
    for (int j = g0; j < g0 + W; ++j) {
      s += in[size_t(j)];
      mx = std::max(mx, in[size_t(j)]);
      if (in[size_t(j)] > in[size_t(best)]) best = j;  // first of the largest: ties to the lower index
    }
    ASSERT_EQ(sums[size_t(t)], s) << "sum, lane " << t << " W " << W << " hw " << hw;
    ASSERT_EQ(maxes[size_t(t)], mx) << "max, lane " << t << " W " << W << " hw " << hw;
    ASSERT_EQ(arg_i[size_t(t)], best) << "argmax, lane " << t << " W " << W << " hw " << hw;
    ASSERT_EQ(arg_v[size_t(t)], in[size_t(best)]);
  }
}

TEST(WaveEmulation, Wave64ReductionsOverAllLanes) { check_subgroup_reductions<64>(256, 64); }
TEST(WaveEmulation, Warp32ReductionsOverAllLanes) { check_subgroup_reductions<32>(256, 32); }
// 32-lane groups inside a 64-wide wavefront (attention decode's layout): the
// halves must not mix.
TEST(WaveEmulation, Groups32InsideWave64StaySeparate) { check_subgroup_reductions<32>(128, 64); }
TEST(WaveEmulation, SmallGroupsInsideWave64) { check_subgroup_reductions<8>(128, 64); }

// block_sum / block_max at the block sizes the kernels use, in warps of W.
template <int W>
void check_block_reductions(int threads) {
  const auto in = random_values(threads, 11 + W + threads, 1000);
  const size_t n = size_t(threads);
  std::vector<float> sums(n), maxes(n);
  std::vector<float> scratch(static_cast<size_t>(W));
  EmulatedBlock block(threads, W);
  block.run([&](EmulatedBlock::Lanes& x) {
    const float v = in[size_t(x.tid)];
    sums[size_t(x.tid)] = wave::block_sum<W>(v, scratch.data(), x);
    maxes[size_t(x.tid)] = wave::block_max<W>(v, scratch.data(), -std::numeric_limits<float>::infinity(), x);
  });
  float s = 0.0f, mx = -std::numeric_limits<float>::infinity();
  for (float v : in) {
    s += v;
    mx = std::max(mx, v);
  }
  for (int t = 0; t < threads; ++t) {
    ASSERT_EQ(sums[size_t(t)], s) << "block_sum, thread " << t << " of " << threads << ", W " << W;
    ASSERT_EQ(maxes[size_t(t)], mx) << "block_max, thread " << t << " of " << threads << ", W " << W;
  }
}

TEST(WaveEmulation, BlockReductionsWave64) {
  check_block_reductions<64>(64);   // one wavefront
  check_block_reductions<64>(256);  // four
  check_block_reductions<64>(1024); // sixteen (norm kernels' largest blocks)
}
TEST(WaveEmulation, BlockReductionsWarp32) {
  check_block_reductions<32>(64);
  check_block_reductions<32>(256);
}

}  // namespace
}  // namespace rf::gpu
