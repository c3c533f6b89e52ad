// The tensor-core prefill attention tile of prefill_mma_tile.h (what
// attention_prefill.cu runs on NVIDIA GPUs) on emulated 32-lane warps whose
// mma.m16n8k16 follows PTX's documented fragment layout, against attention
// in double precision over the same f16 values: head sizes 64, 96, 128 and 256, one
// to eight query heads per block, query tiles of 1 to 16 tokens at any
// position (several key tiles, a partial last one; a decode step's single
// tokens), padding rows (zero outputs), a sliding window and soft-capping.
// This checks the tile's indexing, masking and online softmax on any
// machine; that the hardware follows the layout is PTX's documentation (the
// decode kernel uses the same instruction).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/attention/prefill_mma_tile.h"
#include "core/fp16.h"
#include "op/emulated_block.h"

namespace rf::gpu {
namespace {

struct Case {
  int hd, heads, tokens, first_pos, window = 0;
  float softcap = 0.0f;
  int padding_rows = 0;  // the tile's last tokens are padding (position -1)
  // > 0: the keys split into parts of this many key tiles (query_tiles.h),
  // each part run as its own block, the parts summed here as the combine
  // kernel does.
  int part_key_tiles = 0;
  bool sinks = false;  // a sink logit per head (gpt-oss), in the denominator
};

// A query tile over host arrays: rows are (token, head), head fastest.
struct HostEnv {
  int hd = 0, heads = 0, tokens = 0;
  std::vector<int> positions;           // per token
  std::vector<float> qs;                // [token][head][hd], f16-exact, scaled
  std::vector<uint16_t> kc, vc;         // [key pos][hd] f16 bits
  std::vector<float> out;               // [token][head][hd]
  int k_lo = 0, max_pos = 0, window = 0;
  float softcap = 0.0f;

  int rows() const { return tokens * heads; }
  int pos(int r) const { return positions[size_t(r / heads)]; }
  std::vector<float> sinks;  // [head], or empty
  float sink(int r) const { return sinks.empty() ? -INFINITY : sinks[size_t(r % heads)]; }
  float q(int r, int d) const { return qs[(size_t(r / heads) * heads + size_t(r % heads)) * hd + size_t(d)]; }
  // Row r: rows are [token][head], so its values start at r * hd.
  struct Row {
    HostEnv* env = nullptr;
    int r = 0;
    void q_pair(int d, float& v0, float& v1) const {
      v0 = env->q(r, d);
      v1 = env->q(r, d + 1);
    }
    void store(int d, float v0, float v1) const { put(env->out, d, v0, v1); }
    void store_partial(int d, float v0, float v1) const { put(env->part_out, d, v0, v1); }
    void store_stats(float m, float l) const {
      env->part_m[size_t(r)] = m;
      env->part_l[size_t(r)] = l;
    }
    void put(std::vector<float>& v, int d, float v0, float v1) const {
      v[size_t(r) * size_t(env->hd) + size_t(d)] = v0;
      v[size_t(r) * size_t(env->hd) + size_t(d) + 1] = v1;
    }
  };
  Row row(int r) { return Row{this, r}; }
  int64_t key_row(int p) const { return p; }
  void stage(int64_t p, int c, uint16_t* k8, uint16_t* v8) {
    for (int i = 0; i < 8; ++i) {
      k8[i] = kc[size_t(p) * hd + size_t(8 * c + i)];
      v8[i] = vc[size_t(p) * hd + size_t(8 * c + i)];
    }
  }
  // A key part of a split tile: unnormalized sums and (max, sum) per row.
  bool split = false;
  std::vector<float> part_out;  // [token][head][hd]
  std::vector<float> part_m, part_l;  // [token][head]
  bool partial() const { return split; }
};

float f16_round(float v) { return f16_to_f32(f32_to_f16(v)); }

void check(const Case& c) {
  std::mt19937 rng(unsigned(c.hd * 7919 + c.heads * 131 + c.tokens * 17 + c.first_pos));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  HostEnv e;
  e.hd = c.hd;
  e.heads = c.heads;
  e.tokens = c.tokens;
  const int n_real = c.tokens - c.padding_rows;
  for (int i = 0; i < c.tokens; ++i) e.positions.push_back(i < n_real ? c.first_pos + i : -1);
  const int n_keys = c.first_pos + n_real;
  const float scale = 1.0f / std::sqrt(float(c.hd));
  e.qs.resize(size_t(c.tokens) * c.heads * c.hd);
  for (float& v : e.qs) v = f16_round(f16_round(nd(rng)) * scale);
  e.kc.resize(size_t(n_keys) * c.hd);
  e.vc.resize(e.kc.size());
  for (auto& v : e.kc) v = f32_to_f16(nd(rng));
  for (auto& v : e.vc) v = f32_to_f16(nd(rng));
  e.out.assign(e.qs.size(), -1e30f);
  // Sinks from -2 to 6: from barely visible to outweighing a few hundred keys.
  if (c.sinks)
    for (int h = 0; h < c.heads; ++h) e.sinks.push_back(-2.0f + 8.0f * float(h) / float(std::max(1, c.heads - 1)));
  e.window = c.window;
  e.softcap = c.softcap;
  e.max_pos = n_keys - 1;
  e.k_lo = c.window > 0 ? std::max(0, c.first_pos - c.window + 1) : 0;

  const int warps = (e.rows() + prefill_mma::kWarpRows - 1) / prefill_mma::kWarpRows;
  const int bytes = c.hd == 64    ? prefill_mma::kSmemBytes<64>
                    : c.hd == 96  ? prefill_mma::kSmemBytes<96>
                    : c.hd == 128 ? prefill_mma::kSmemBytes<128>
                                  : prefill_mma::kSmemBytes<256>;
  std::vector<uint16_t> smem(static_cast<size_t>(bytes) / 2);
  auto run_block = [&] {
    EmulatedBlock block(32 * warps, 32);
    block.run([&](EmulatedBlock::Lanes& lanes) {
      if (c.hd == 64) prefill_mma::attend<64>(e, smem.data(), lanes);
      else if (c.hd == 96) prefill_mma::attend<96>(e, smem.data(), lanes);
      else if (c.hd == 128) prefill_mma::attend<128>(e, smem.data(), lanes);
      else prefill_mma::attend<256>(e, smem.data(), lanes);
    });
  };
  if (c.part_key_tiles == 0) {
    run_block();
  } else {
    // Parts as the tensor-core kernel runs them: keys [begin, end) at
    // multiples of the key tile, k_lo raised to the part's first key (a
    // window may start later), max_pos lowered to its last.
    const int key_tile = c.hd == 256 ? prefill_mma::kKeys<256> : prefill_mma::kKeys<64>;
    const int part_keys = c.part_key_tiles * key_tile, k_lo = e.k_lo, max_pos = e.max_pos;
    const size_t n_rows = size_t(e.rows());
    std::vector<double> mx(n_rows, -INFINITY), den(n_rows, 0.0), acc(e.qs.size(), 0.0);
    std::vector<std::vector<float>> outs;
    std::vector<std::vector<float>> ms, ls;
    e.split = true;
    int parts = 0;
    for (int begin = 0; begin <= max_pos; begin += part_keys, ++parts) {
      e.k_lo = std::max(k_lo, begin);
      e.max_pos = std::min(max_pos, begin + part_keys - 1);
      e.part_out.assign(e.qs.size(), -1e30f);
      e.part_m.assign(n_rows, 1e30f);
      e.part_l.assign(n_rows, -1.0f);
      run_block();
      outs.push_back(e.part_out);
      ms.push_back(e.part_m);
      ls.push_back(e.part_l);
    }
    ASSERT_GT(parts, 1) << "the case should split its keys";
    for (size_t r = 0; r < n_rows; ++r) {
      for (int p = 0; p < parts; ++p) mx[r] = std::max(mx[r], double(ms[size_t(p)][r]));
      // The combine kernel's sink term (softmax_sink.h).
      const double sink = e.sink(int(r));
      mx[r] = std::max(mx[r], sink);
      if (sink != -INFINITY) den[r] += std::exp(sink - mx[r]);
      for (int p = 0; p < parts; ++p) {
        if (ms[size_t(p)][r] == -INFINITY) {
          ASSERT_EQ(ls[size_t(p)][r], 0.0f) << "a part that saw no key sums nothing";
          continue;
        }
        const double w = std::exp(double(ms[size_t(p)][r]) - mx[r]);
        den[r] += w * double(ls[size_t(p)][r]);
        for (int d = 0; d < c.hd; ++d) acc[r * size_t(c.hd) + size_t(d)] += w * double(outs[size_t(p)][r * size_t(c.hd) + size_t(d)]);
      }
      const double inv = e.pos(int(r)) >= 0 && den[r] > 0 ? 1.0 / den[r] : 0.0;
      for (int d = 0; d < c.hd; ++d) e.out[r * size_t(c.hd) + size_t(d)] = float(acc[r * size_t(c.hd) + size_t(d)] * inv);
    }
  }

  double worst = 0;
  for (int tok = 0; tok < c.tokens; ++tok)
    for (int h = 0; h < c.heads; ++h) {
      const float* got = &e.out[(size_t(tok) * c.heads + h) * c.hd];
      const int p = e.positions[size_t(tok)];
      if (p < 0) {
        for (int d = 0; d < c.hd; ++d) ASSERT_EQ(got[d], 0.0f) << "a padding row's output must be zero";
        continue;
      }
      std::vector<double> w;
      double mx = -INFINITY;
      for (int j = 0; j <= p; ++j) {
        if (c.window > 0 && j <= p - c.window) {
          w.push_back(-INFINITY);
          continue;
        }
        double s = 0;
        for (int d = 0; d < c.hd; ++d)
          s += double(e.q(tok * c.heads + h, d)) * double(f16_to_f32(e.kc[size_t(j) * c.hd + size_t(d)]));
        if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
        w.push_back(s);
        mx = std::max(mx, s);
      }
      const double sink = e.sink(tok * c.heads + h);
      mx = std::max(mx, sink);
      double z = sink == -INFINITY ? 0.0 : std::exp(sink - mx);
      for (double& v : w) z += (v = std::exp(v - mx));
      for (int d = 0; d < c.hd; ++d) {
        double want = 0;
        for (int j = 0; j <= p; ++j) want += w[size_t(j)] * double(f16_to_f32(e.vc[size_t(j) * c.hd + size_t(d)]));
        want /= z;
        worst = std::max(worst, std::fabs(double(got[d]) - want));
        // P is rounded to f16 for P V (relative 2^-11 per weight), values ~N(0, 1).
        ASSERT_NEAR(got[d], want, 4e-3) << "hd " << c.hd << " heads " << c.heads << " token " << tok << " (pos " << p
                                         << ") head " << h << " dim " << d;
      }
    }
  std::printf("hd %d, %d heads, %d tokens from %d: largest error %.2e\n", c.hd, c.heads, c.tokens, c.first_pos, worst);
}

TEST(PrefillMmaEmulation, OneTokenOneHead) { check({64, 1, 1, 0}); }
// One-token chunks far into their context (a prompt's last chunk may be one
// token); a padding token (position -1) alone.
TEST(PrefillMmaEmulation, DecodeTokenGroupOfFour) { check({128, 4, 1, 700}); }
TEST(PrefillMmaEmulation, DecodeTokenHeadSize96Window) { check({96, 8, 1, 300, 100, 2.0f}); }
TEST(PrefillMmaEmulation, PaddingTokenAlone) { check({128, 4, 1, 0, 0, 0.0f, 1}); }
TEST(PrefillMmaEmulation, FullTileGroupOfFour) { check({128, 4, 16, 0}); }
TEST(PrefillMmaEmulation, LaterChunkSeveralKeyTiles) { check({128, 2, 16, 150}); }
TEST(PrefillMmaEmulation, EightHeadsPartialTile) { check({64, 8, 11, 70}); }
TEST(PrefillMmaEmulation, PaddingRows) { check({64, 4, 16, 30, 0, 0.0f, 5}); }
TEST(PrefillMmaEmulation, SlidingWindowAndSoftCap) { check({128, 2, 16, 140, 40, 30.0f}); }
TEST(PrefillMmaEmulation, WindowShorterThanTheTile) { check({64, 4, 16, 100, 7}); }
// Head size 96 (Phi-3, MHA: one head per KV head).
TEST(PrefillMmaEmulation, HeadSize96OneHeadPerKVHead) { check({96, 1, 16, 75}); }
// Head size 256 (Gemma): key tiles of 32.
TEST(PrefillMmaEmulation, HeadSize256WindowAndSoftCap) { check({256, 2, 16, 90, 50, 50.0f}); }
TEST(PrefillMmaEmulation, HeadSize256PaddingRows) { check({256, 4, 13, 20, 0, 0.0f, 3}); }
// Tiles split over their keys (query_tiles.h): parts of one and of two key
// tiles, a window that empties the first parts, padding rows, soft-capping.
TEST(PrefillMmaEmulation, SplitKeysOneTilePerPart) { check({128, 4, 16, 300, 0, 0.0f, 0, 1}); }
TEST(PrefillMmaEmulation, SplitKeysTwoTilesPerPartWindow) { check({64, 2, 16, 400, 150, 0.0f, 0, 2}); }
TEST(PrefillMmaEmulation, SplitKeysPaddingRowsSoftCap) { check({96, 1, 16, 200, 0, 20.0f, 4, 1}); }
TEST(PrefillMmaEmulation, SplitKeysHeadSize256) { check({256, 2, 9, 100, 0, 0.0f, 0, 2}); }
// Attention sinks (gpt-oss: head size 64, window 128 on every other layer),
// whole tiles and split ones, padding rows.
TEST(PrefillMmaEmulation, SinksEightHeads) { check({64, 8, 16, 40, 0, 0.0f, 0, 0, true}); }
TEST(PrefillMmaEmulation, SinksWindowPaddingRows) { check({64, 8, 16, 300, 128, 0.0f, 3, 0, true}); }
TEST(PrefillMmaEmulation, SinksDecodeToken) { check({64, 4, 1, 0, 0, 0.0f, 0, 0, true}); }
TEST(PrefillMmaEmulation, SinksSplitKeys) { check({64, 4, 16, 400, 0, 0.0f, 0, 1, true}); }
TEST(PrefillMmaEmulation, SinksSplitKeysWindow) { check({128, 2, 16, 300, 128, 0.0f, 2, 1, true}); }

}  // namespace
}  // namespace rf::gpu
