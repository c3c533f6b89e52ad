// The CPU backend's 8-bit KV cache (--kv-cache-dtype fp8): rope_store_kv
// into an F8_E4M3 cache and attention over it, beside the same ops on an f32
// cache. K/V rows of magnitudes from 2^-10 to 10^3, with outliers,
// subnormal-range elements and all-zero rows, for three sequences in
// scattered blocks, GQA, prefill then a mixed step; plain attention, a
// sliding window and soft-capping. Checked: the stored bytes and scales are
// core/fp8.h's encoding of the roped f32 rows (taken from the f32 run); the
// output equals double attention over the dequantized rows; and it stays
// within an error bound derived from e4m3's precision of the f32 result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/fp8.h"

#include "op/op_test_util.h"

namespace rf {
namespace {

using test::randn;

constexpr int kHd = 32, kHeads = 8, kKv = 2, kBs = 4, kBlocks = 24, kMaxBlocks = 8;
constexpr int kKvDim = kKv * kHd;
constexpr size_t kSlots = size_t(kBlocks) * kBs;

// An f32 cache and an F8_E4M3 one of the same shape; unwritten fp8 slots
// keep the bytes 0x55 and NaN scales.
struct Caches {
  std::vector<float> kf = std::vector<float>(kSlots * kKvDim, 0.0f), vf = kf;
  std::vector<uint8_t> k8 = std::vector<uint8_t>(kSlots * kKvDim, 0x55), v8 = k8;
  std::vector<float> ks = std::vector<float>(kSlots * kKv, NAN), vs = ks;
  KVLayer f32() { return KVLayer{kf.data(), vf.data(), DType::F32, kBlocks, kBs, kKv, kHd}; }
  KVLayer fp8() {
    return KVLayer{k8.data(), v8.data(), DType::F8_E4M3, kBlocks, kBs, kKv, kHd, ks.data(), vs.data()};
  }
};

// n_tok tokens of K or V rows: each (token, KV head) row N(0, 1) times a row
// magnitude 2^U(lo, hi), its elements spread over 2^-6 .. 1 of it, one
// element 30x (an outlier) and one ~1e-5 of the row's largest (below e4m3's
// normal range after scaling); rows listed in `zero_rows` all zero.
std::vector<float> varied_rows(int n_tok, float lo, float hi, std::mt19937& rng, std::vector<int> zero_rows = {}) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> x = randn(size_t(n_tok) * kKvDim, rng);
  for (int r = 0; r < n_tok * kKv; ++r) {
    float* row = x.data() + size_t(r) * kHd;
    const float mag = std::exp2(lo + (hi - lo) * u(rng));
    for (int d = 0; d < kHd; ++d) row[d] *= mag * std::exp2(-6.0f * u(rng));
    row[r % kHd] *= 30.0f;
    row[(r + 7) % kHd] = mag * 1e-5f;
    if (std::find(zero_rows.begin(), zero_rows.end(), r) != zero_rows.end()) std::fill_n(row, kHd, 0.0f);
  }
  return x;
}

// Dense double attention of one query head over keys [first, pos] of a
// sequence: key(j, d) and value(j, d) give its rows; p receives the softmax.
template <class K, class V>
std::vector<double> attend(const float* qh, int first, int pos, const AttentionParams& ap, K key, V value,
                           std::vector<double>* p = nullptr) {
  std::vector<double> sc;
  for (int j = first; j <= pos; ++j) {
    double s = 0;
    for (int d = 0; d < kHd; ++d) s += double(qh[d]) * key(j, d);
    s *= ap.scale;
    if (ap.softcap > 0) s = ap.softcap * std::tanh(s / ap.softcap);
    sc.push_back(s);
  }
  const double mx = *std::max_element(sc.begin(), sc.end());
  double z = 0;
  for (double& s : sc) z += (s = std::exp(s - mx));
  for (double& s : sc) s /= z;
  std::vector<double> out(kHd, 0.0);
  for (int j = first; j <= pos; ++j)
    for (int d = 0; d < kHd; ++d) out[size_t(d)] += sc[size_t(j - first)] * value(j, d);
  if (p) *p = sc;
  return out;
}

// Bound on |e4m3 row element - x| for an element x of a row of scale s:
// half a step of 3 mantissa bits (2^-4 relative) in the normal range, else
// half a subnormal step (2^-10 * s), and never more than |x| (0 is a code).
double e4m3_error_bound(double x, double s) {
  const double a = std::fabs(x);
  return a >= std::ldexp(s, -6) ? a / 16 : std::min(a, std::ldexp(s, -10));
}

struct Fp8AttnCase {
  const char* name;
  int window;
  float softcap;
};

class CpuFp8Attention : public ::testing::TestWithParam<Fp8AttnCase> {};

TEST_P(CpuFp8Attention, StoresScaledE4M3RowsAndAttendsOverThem) {
  const Fp8AttnCase ac = GetParam();
  std::mt19937 rng(21);
  CpuBackend be(2);
  Caches c;
  RopeParams rope;
  rope.n_rot = kHd;
  rope.freq_base = 10000.0f;
  rope.n_ctx_orig = 4096;
  AttentionParams ap{kHeads, kKv, kHd, 1.0f / std::sqrt(float(kHd)), ac.window, ac.softcap};
  // Step 1 prefills three sequences (blocks scattered); step 2 adds a chunk
  // of 3 to the first and decodes one token of the others.
  const std::vector<std::vector<int32_t>> blocks = {{5, 2, 9, 14}, {7, 20}, {0, 23, 12, 3}};
  const std::vector<std::vector<test::BatchSeq>> steps = {
      {{10, 10, blocks[0]}, {5, 5, blocks[1]}, {15, 15, blocks[2]}},
      {{13, 3, blocks[0]}, {6, 1, blocks[1]}, {16, 1, blocks[2]}}};
  std::vector<bool> written(kSlots, false);
  double worst_ratio = 0;  // largest |fp8 - f32| / bound seen
  for (size_t step = 0; step < steps.size(); ++step) {
    const Batch b = test::make_batch(kBs, kMaxBlocks, steps[step]);
    const StepMeta m = be.upload_step(b);
    const int n = b.n_tokens();
    // Inputs; the fp8 run gets copies (RoPE rotates q and k in place).
    auto q = randn(size_t(n) * kHeads * kHd, rng);
    auto k = varied_rows(n, -10.0f, 1.0f, rng, {3});
    auto v = varied_rows(n, -10.0f, 10.0f, rng, {4, 2 * n - 1});
    const auto k_in = k;
    auto q8 = q, k8 = k, v8 = v;
    Tensor tq = make_tensor(q.data(), DType::F32, kHeads * kHd, n), tk = make_tensor(k.data(), DType::F32, kKvDim, n),
           tv = make_tensor(v.data(), DType::F32, kKvDim, n);
    Tensor tq8 = make_tensor(q8.data(), DType::F32, kHeads * kHd, n),
           tk8 = make_tensor(k8.data(), DType::F32, kKvDim, n), tv8 = make_tensor(v8.data(), DType::F32, kKvDim, n);
    be.rope_store_kv(tq, tk, tv, m, rope, c.f32());
    be.rope_store_kv(tq8, tk8, tv8, m, rope, c.fp8());
    ASSERT_EQ(q8, q);
    ASSERT_EQ(k8, k);
    ASSERT_NE(k, k_in) << "RoPE rotated nothing";

    // (a) Each stored row: bytes and scale as core/fp8.h encodes the roped
    // f32 row that the f32 run stored in the same slot.
    for (int t = 0; t < n; ++t) {
      const int slot = b.groups[0].slot_mapping[size_t(t)];
      ASSERT_GE(slot, 0);
      written[size_t(slot)] = true;
      for (int kind = 0; kind < 2; ++kind) {
        const std::vector<float>& rows = kind ? c.vf : c.kf;
        const std::vector<uint8_t>& bytes = kind ? c.v8 : c.k8;
        const std::vector<float>& scales = kind ? c.vs : c.ks;
        for (int h = 0; h < kKv; ++h) {
          const float* x = rows.data() + (size_t(slot) * kKv + h) * kHd;
          float amax = 0;
          for (int d = 0; d < kHd; ++d) amax = std::max(amax, std::fabs(x[d]));
          const float s = amax > 0 ? amax / 448.0f : 1.0f;
          ASSERT_EQ(scales[size_t(slot) * kKv + h], s) << (kind ? "V" : "K") << " slot " << slot << " head " << h;
          for (int d = 0; d < kHd; ++d)
            ASSERT_EQ(int(bytes[(size_t(slot) * kKv + h) * kHd + d]), int(e4m3_from_float(x[d] / s)))
                << (kind ? "V" : "K") << " slot " << slot << " head " << h << " element " << d;
        }
      }
    }
    for (size_t slot = 0; slot < kSlots; ++slot)
      if (!written[slot]) {
        ASSERT_EQ(c.k8[slot * kKvDim], 0x55) << "slot " << slot << " written but in no slot mapping";
        ASSERT_TRUE(std::isnan(c.vs[slot * kKv])) << "slot " << slot;
      }

    std::vector<float> out(q.size(), NAN), out8(q.size(), NAN);
    Tensor to = make_tensor(out.data(), DType::F32, kHeads * kHd, n),
           to8 = make_tensor(out8.data(), DType::F32, kHeads * kHd, n);
    if (ac.window > 0 || ac.softcap > 0) {
      be.attention_ext(tq, c.f32(), m, ap, to);
      be.attention_ext(tq8, c.fp8(), m, ap, to8);
    } else {
      be.attention(tq, c.f32(), m, ap, to);
      be.attention(tq8, c.fp8(), m, ap, to8);
    }

    for (int t = 0; t < n; ++t) {
      const std::vector<int32_t>& table = blocks[size_t(b.token_seq[size_t(t)])];
      const int pos = b.positions[size_t(t)];
      const int first = ac.window > 0 ? std::max(0, pos - ac.window + 1) : 0;
      auto at = [&](int j, int kvh) { return (size_t(table[size_t(j / kBs)]) * kBs + size_t(j % kBs)) * kKv + kvh; };
      for (int h = 0; h < kHeads; ++h) {
        const int kvh = h / (kHeads / kKv);
        const float* qh = q.data() + (size_t(t) * kHeads + h) * kHd;
        const float* got8 = out8.data() + (size_t(t) * kHeads + h) * kHd;
        const float* got = out.data() + (size_t(t) * kHeads + h) * kHd;
        auto deq = [&](const std::vector<uint8_t>& bytes, const std::vector<float>& scales) {
          return [&, kvh](int j, int d) {
            return double(e4m3_to_float(bytes[at(j, kvh) * kHd + size_t(d)])) * scales[at(j, kvh)];
          };
        };
        auto f32 = [&](const std::vector<float>& rows) {
          return [&, kvh](int j, int d) { return double(rows[at(j, kvh) * kHd + size_t(d)]); };
        };
        // (b) Double attention over the dequantized rows: the same numbers.
        const auto want8 = attend(qh, first, pos, ap, deq(c.k8, c.ks), deq(c.v8, c.vs));
        double mx = 0, err = 0;
        for (int d = 0; d < kHd; ++d) {
          mx = std::max(mx, std::fabs(want8[size_t(d)]));
          err = std::max(err, std::fabs(double(got8[d]) - want8[size_t(d)]));
        }
        ASSERT_LE(err, 1e-5 * mx) << ac.name << " step " << step << " token " << t << " head " << h;

        // (c) Against the f32 cache. With every element within E (above)
        // of its f32 value, each logit moves by at most
        // delta = scale * sum_d |q_d| E(k_jd) (soft-capping only shrinks
        // differences), so each softmax weight p_j by a factor within
        // e^(+-2 delta); hence
        //   |out8_d - out_d| <= (e^(2 delta) - 1) * sum_j p_j |v~_jd| + sum_j p_j E(v_jd),
        // |v~| <= (1 + 2^-4) |v|, p from double attention over the f32 rows.
        std::vector<double> p;
        attend(qh, first, pos, ap, f32(c.kf), f32(c.vf), &p);
        double delta = 0;
        for (int j = first; j <= pos; ++j) {
          double dj = 0;
          for (int d = 0; d < kHd; ++d)
            dj += std::fabs(double(qh[d])) * e4m3_error_bound(c.kf[at(j, kvh) * kHd + size_t(d)], c.ks[at(j, kvh)]);
          delta = std::max(delta, dj * ap.scale);
        }
        for (int d = 0; d < kHd; ++d) {
          double pv = 0, pe = 0;
          for (int j = first; j <= pos; ++j) {
            const double vj = c.vf[at(j, kvh) * kHd + size_t(d)];
            pv += p[size_t(j - first)] * std::fabs(vj);
            pe += p[size_t(j - first)] * e4m3_error_bound(vj, c.vs[at(j, kvh)]);
          }
          const double bound = (std::exp(2 * delta) - 1) * (1 + 1.0 / 16) * pv + pe + 1e-6 * pv;  // + f32 rounding
          const double diff = std::fabs(double(got8[d]) - double(got[d]));
          ASSERT_LE(diff, bound) << ac.name << " step " << step << " token " << t << " head " << h << " dim " << d;
          if (pv > 0) worst_ratio = std::max(worst_ratio, diff / bound);
        }
      }
    }
  }
  // The fp8 cache did change the result (the bound is not met trivially).
  EXPECT_GT(worst_ratio, 0.01) << ac.name;
  std::printf("%s: largest |fp8 - f32| is %.3f of its bound\n", ac.name, worst_ratio);
}

INSTANTIATE_TEST_SUITE_P(Variants, CpuFp8Attention,
                         ::testing::Values(Fp8AttnCase{"full", 0, 0.0f}, Fp8AttnCase{"window", 5, 0.0f},
                                           Fp8AttnCase{"softcap", 0, 2.0f}, Fp8AttnCase{"window_softcap", 4, 2.0f}),
                         [](const auto& info) { return std::string(info.param.name); });

// A cache typed F8_E4M3 without its scale arrays is refused, not read.
TEST(CpuFp8Attention, CacheWithoutScalesIsRefused) {
  CpuBackend be(1);
  Caches c;
  KVLayer bad = c.fp8();
  bad.v_scale = nullptr;
  const Batch b = test::make_batch(kBs, kMaxBlocks, {{2, 2, {1}}});
  const StepMeta m = be.upload_step(b);
  std::vector<float> q(size_t(2) * kHeads * kHd, 1.0f), k(size_t(2) * kKvDim, 1.0f), v = k, out(q.size());
  Tensor tq = make_tensor(q.data(), DType::F32, kHeads * kHd, 2), tk = make_tensor(k.data(), DType::F32, kKvDim, 2),
         tv = make_tensor(v.data(), DType::F32, kKvDim, 2), to = make_tensor(out.data(), DType::F32, kHeads * kHd, 2);
  RopeParams rope;
  rope.n_rot = kHd;
  rope.n_ctx_orig = 4096;
  EXPECT_THROW(be.rope_store_kv(tq, tk, tv, m, rope, bad), Error);
  EXPECT_THROW(be.attention(tq, bad, m, AttentionParams{kHeads, kKv, kHd, 0.1f}, to), Error);
}

}  // namespace
}  // namespace rf
