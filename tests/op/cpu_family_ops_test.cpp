// The CPU ops that model families beyond Llama need, each against a naive
// double-precision reference on fresh random inputs, beyond the table of op
// cases (op_cases.h, which has per-head RMSNorm and partial rotary): bias
// add's width check, GeGLU bit for bit (the tanh approximation of GELU, as
// ggml evaluates it), scale, soft-capping's bounds, and paged attention with
// a sliding window, logit soft-capping, sinks and a custom scale over a mixed
// batch; the batch's checks (validate) and its padding for decode graphs
// (pad_to).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/rope_math.h"
#include "core/error.h"
#include "core/fp16.h"

#include "op/op_test_util.h"

namespace rf {
namespace {

using test::randn;

double max_rel(const std::vector<float>& got, const std::vector<double>& want) {
  double mx = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    mx = std::max(mx, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return mx / std::max(scale, 1e-300);
}

TEST(CpuFamilyOps, AddBias) {
  std::mt19937 rng(11);
  CpuBackend be(2);
  const int n = 5, d = 96;
  auto x = randn(size_t(n) * d, rng), b = randn(d, rng);
  const auto x0 = x;
  Tensor tx = make_tensor(x.data(), DType::F32, d, n), tb = make_tensor(b.data(), DType::F32, d);
  be.add_bias(tx, tb);
  std::vector<double> want(x.size());
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < d; ++i) want[size_t(r * d + i)] = double(x0[size_t(r * d + i)]) + b[size_t(i)];
  EXPECT_LT(max_rel(x, want), 1e-7);
  std::vector<float> short_bias(d - 1);
  Tensor tsb = make_tensor(short_bias.data(), DType::F32, d - 1);
  EXPECT_THROW(be.add_bias(tx, tsb), Error);
}

// GeGLU's GELU is evaluated as ggml does (f16 input, f16 result): against
// a double reference of that definition, and within f16 rounding of the
// exact tanh approximation.
TEST(CpuFamilyOps, GegluIsGeluTanhTimesUp) {
  std::mt19937 rng(12);
  CpuBackend be(2);
  auto g = randn(3000, rng, 3.0f), u = randn(3000, rng);
  g[0] = 0.0f, g[1] = -12.0f, g[2] = 12.0f, g[3] = -1e-3f, g[4] = -10.0f, g[5] = 9.999f;  // zero, tails, tiny
  std::vector<float> o(3000, NAN);
  Tensor tg = make_tensor(g.data(), DType::F32, 300, 10), tu = make_tensor(u.data(), DType::F32, 300, 10),
         to = make_tensor(o.data(), DType::F32, 300, 10);
  be.geglu(tg, tu, to);
  auto gelu = [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); };
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    double a;  // the definition, written out
    if (x <= -10) {
      a = 0;
    } else if (x >= 10) {
      a = x;
    } else {
      a = f16_to_f32(f32_to_f16(float(gelu(f16_to_f32(f32_to_f16(g[i]))))));
    }
    ASSERT_EQ(o[i], float(a * u[i])) << "gate " << g[i];
    // Within f16 rounding (input and output) of the exact function.
    const double exact = gelu(x) * u[i];
    ASSERT_NEAR(o[i], exact, 2e-3 * (std::abs(exact) + std::abs(x * u[i])) + 1e-7) << "gate " << g[i];
  }
}

TEST(CpuFamilyOps, ScaleAndSoftcap) {
  std::mt19937 rng(13);
  CpuBackend be(2);
  auto x = randn(700, rng, 20.0f);
  const auto x0 = x;
  Tensor tx = make_tensor(x.data(), DType::F32, 70, 10);
  be.scale(tx, 8.0f);
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = double(x0[i]) * 8.0;
  EXPECT_LT(max_rel(x, want), 1e-7);
  x = x0;
  be.softcap(tx, 30.0f);
  for (size_t i = 0; i < x.size(); ++i) want[i] = 30.0 * std::tanh(double(x0[i]) / 30.0);
  EXPECT_LT(max_rel(x, want), 1e-7);
  for (float v : x) ASSERT_LE(std::abs(v), 30.0f);
  EXPECT_THROW(be.softcap(tx, 0.0f), Error);
}

// Dense double attention over one sequence's keys [first, pos], optionally
// soft-capped, optionally with a sink logit per head in the denominator.
struct AttnCase {
  const char* name;
  int window;
  float softcap, scale;
  bool sinks = false;  // a sink logit per head (gpt-oss)
};

class CpuAttentionExt : public ::testing::TestWithParam<AttnCase> {};

TEST_P(CpuAttentionExt, MatchesDenseReference) {
  const AttnCase ac = GetParam();
  std::mt19937 rng(16);
  CpuBackend be(2);
  const int hd = 16, n_heads = 4, n_kv = 2, bs = 4, num_blocks = 32;
  const int kv_dim = n_kv * hd;
  std::vector<float> kc(size_t(num_blocks * bs) * kv_dim), vc(kc.size());
  for (auto& x : kc) x = std::normal_distribution<float>(0.0f, 2.0f)(rng);
  for (auto& x : vc) x = std::normal_distribution<float>()(rng);
  KVLayer cache{kc.data(), vc.data(), DType::F32, num_blocks, bs, n_kv, hd};
  // A prefill of 13 tokens (longer than the window), a decode at position 20
  // and one at position 2 (shorter than the window), blocks scattered.
  const std::vector<test::BatchSeq> seqs = {{13, 13, {5, 2, 9, 14}}, {21, 1, {0, 30, 12, 3, 20, 6}}, {3, 1, {7}}};
  const Batch b = test::make_batch(bs, 8, seqs);
  StepMeta m = be.upload_step(b);
  const int n_tok = b.n_tokens();
  auto q = randn(size_t(n_tok) * n_heads * hd, rng);
  std::vector<float> out(q.size(), NAN);
  AttentionParams ap{n_heads, n_kv, hd, ac.scale, ac.window, ac.softcap};
  // Sinks around the logits' own range: some dominate a head, some barely count.
  const std::vector<float> sinks = {2.5f, -1.0f, 0.3f, 6.0f};
  if (ac.sinks) ap.sinks = sinks.data();
  Tensor tq = make_tensor(q.data(), DType::F32, n_heads * hd, n_tok), to = make_tensor(out.data(), DType::F32, n_heads * hd, n_tok);
  be.attention_ext(tq, cache, m, ap, to);
  std::vector<double> want(q.size());
  for (int t = 0; t < n_tok; ++t) {
    const test::BatchSeq& s = seqs[size_t(b.token_seq[size_t(t)])];
    const int pos = b.positions[size_t(t)];
    const int first = ac.window > 0 ? std::max(0, pos - ac.window + 1) : 0;
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / (n_heads / n_kv);
      std::vector<double> sc;
      for (int j = first; j <= pos; ++j) {
        const int slot = s.blocks[size_t(j / bs)] * bs + j % bs;
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(q[size_t(t * n_heads * hd + h * hd + i)]) * kc[size_t(slot * kv_dim + kvh * hd + i)];
        d *= ac.scale;
        if (ac.softcap > 0) d = ac.softcap * std::tanh(d / ac.softcap);
        sc.push_back(d);
      }
      double mx = *std::max_element(sc.begin(), sc.end());
      if (ac.sinks) mx = std::max(mx, double(sinks[size_t(h)]));
      double z = ac.sinks ? std::exp(double(sinks[size_t(h)]) - mx) : 0.0;
      for (double& x : sc) z += (x = std::exp(x - mx));
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (int j = first; j <= pos; ++j) {
          const int slot = s.blocks[size_t(j / bs)] * bs + j % bs;
          acc += sc[size_t(j - first)] / z * vc[size_t(slot * kv_dim + kvh * hd + i)];
        }
        want[size_t(t * n_heads * hd + h * hd + i)] = acc;
      }
    }
  }
  EXPECT_LT(max_rel(out, want), 1e-6) << ac.name;
  if (ac.window > 0) {
    // As a sliding-window KV group leaves them: table entries wholly before
    // the window of a sequence's first new token released (-1), their
    // blocks and the keys before the window poisoned with NaN (another
    // sequence's data, uninitialized memory). Same result.
    Batch r = b;
    for (int s = 0; s < r.n_seqs(); ++s) {
      const int first_key = std::max(0, r.positions[size_t(r.seq_starts[size_t(s)])] - ac.window + 1);
      for (int p = 0; p < first_key; ++p) {
        const int slot = seqs[size_t(s)].blocks[size_t(p / bs)] * bs + p % bs;
        std::fill_n(kc.begin() + slot * kv_dim, kv_dim, NAN);
        std::fill_n(vc.begin() + slot * kv_dim, kv_dim, NAN);
      }
      for (int i = 0; (i + 1) * bs <= first_key; ++i) r.groups[0].block_tables[size_t(s * 8 + i)] = -1;
    }
    const int32_t windows[1] = {ac.window};
    r.validate(num_blocks, windows);
    StepMeta rm = be.upload_step(r);
    std::vector<float> out2(q.size(), NAN);
    Tensor to2 = make_tensor(out2.data(), DType::F32, n_heads * hd, n_tok);
    be.attention_ext(tq, cache, rm, ap, to2);
    for (float x : out2) ASSERT_TRUE(std::isfinite(x)) << ac.name << ": a released or masked key was read";
    EXPECT_LT(max_rel(out2, want), 1e-6) << ac.name;
  }
  // The plain op refuses what only attention_ext does.
  if (ac.window > 0 || ac.softcap > 0 || ac.sinks) {
    EXPECT_THROW(be.attention(tq, cache, m, ap, to), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, CpuAttentionExt,
                         ::testing::Values(AttnCase{"full", 0, 0.0f, 0.25f}, AttnCase{"window", 5, 0.0f, 0.25f},
                                           AttnCase{"softcap", 0, 2.0f, 0.5f},
                                           AttnCase{"window_softcap", 8, 2.0f, 1.0f / std::sqrt(32.0f)},
                                           AttnCase{"window_1", 1, 0.0f, 0.25f},
                                           AttnCase{"sinks", 0, 0.0f, 0.25f, true},
                                           AttnCase{"window_sinks", 5, 0.0f, 0.25f, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// Batch::pad_to (decode graphs' buckets): padding sequences of one token at
// position -1, no KV slot, zero block tables and a logits row each; the
// padded batch is consistent and the CPU's attention gives the sequences'
// rows unchanged and zero padding rows.
TEST(BatchPad, PaddingSequencesAttendToNothing) {
  Batch b;
  b.reset(4, 3, 2);
  const std::vector<int32_t> tok = {5}, t0 = {0, 1}, t1 = {2, 3};
  const std::span<const int32_t> tables[2] = {t0, t1};
  b.add_sequence(tok, 6, tables, true);
  Batch p = b;
  p.pad_to(4);
  ASSERT_EQ(p.n_seqs(), 4);
  ASSERT_EQ(p.n_tokens(), 4);
  ASSERT_EQ(p.n_logits(), 4);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(p.positions[size_t(i)], -1);
    EXPECT_EQ(p.token_seq[size_t(i)], i);
    EXPECT_EQ(p.seq_starts[size_t(i) + 1], i + 1);
    EXPECT_EQ(p.context_lens[size_t(i)], 0);
    EXPECT_EQ(p.logits_rows[size_t(i)], i);
    for (const Batch::Group& g : p.groups) {
      EXPECT_EQ(g.slot_mapping[size_t(i)], -1);
      for (int k = 0; k < 3; ++k) EXPECT_EQ(g.block_tables[size_t(i) * 3 + size_t(k)], 0);
    }
  }
  const int32_t windows[2] = {0, 0};
  EXPECT_NO_THROW(p.validate(8, windows));
  p.pad_to(2);  // never shrinks
  EXPECT_EQ(p.n_seqs(), 4);

  CpuBackend cpu(1);
  const int hd = 8, heads = 2, slots = 32;
  std::vector<float> kc(size_t(slots) * hd), vc(kc.size()), q(size_t(4) * heads * hd), out(q.size(), 7.0f);
  for (size_t i = 0; i < kc.size(); ++i) kc[i] = vc[i] = float(i % 13) / 13.0f;
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(i % 5) / 5.0f;
  KVLayer cache{kc.data(), vc.data(), DType::F32, 8, 4, 1, hd};
  AttentionParams ap{heads, 1, hd, 0.5f};
  std::vector<float> alone(size_t(heads) * hd);
  Tensor q1 = make_tensor(q.data(), DType::F32, heads * hd, 1), o1 = make_tensor(alone.data(), DType::F32, heads * hd, 1);
  cpu.attention(q1, cache, cpu.upload_step(b), ap, o1);
  Tensor q4 = make_tensor(q.data(), DType::F32, heads * hd, 4), o4 = make_tensor(out.data(), DType::F32, heads * hd, 4);
  cpu.attention(q4, cache, cpu.upload_step(p), ap, o4);
  for (size_t i = 0; i < alone.size(); ++i) EXPECT_EQ(out[i], alone[i]);
  for (size_t i = alone.size(); i < out.size(); ++i) EXPECT_EQ(out[i], 0.0f) << "padding row " << i / alone.size();
}

// Batch::validate: released (negative) block-table entries only in
// sliding-window groups and wholly before the window of the sequence's
// first new token; slots inside the tables.
TEST(BatchValidate, ReleasedEntriesOnlyBeforeTheWindow) {
  Batch b;
  b.reset(4, 8, 2);  // group 0: window 6; group 1: full attention
  const std::vector<int32_t> toks = {1, 1};
  const std::vector<int32_t> win = {-1, -1, 7, 8, 9}, full = {0, 1, 2, 3, 4};
  const std::span<const int32_t> tables[2] = {win, full};
  b.add_sequence(toks, 17, tables, true);  // positions 17, 18: keys from 12 (block 3) on
  const int32_t windows[2] = {6, 0};
  EXPECT_NO_THROW(b.validate(16, windows));
  Batch more = b;
  more.groups[0].block_tables[2] = -1;  // block 2 (keys 8-11) lies before the window of 17 (keys from 12)...
  EXPECT_NO_THROW(more.validate(16, windows));
  const int32_t wider[2] = {10, 0};
  EXPECT_THROW(more.validate(16, wider), Error);  // ... but not before a window of 10 (keys from 8)
  Batch in_window = b;
  in_window.groups[0].block_tables[3] = -1;  // keys 12-15: inside the window
  EXPECT_THROW(in_window.validate(16, windows), Error);
  Batch in_full = b;
  in_full.groups[1].block_tables[0] = -1;  // a full group reads every block
  EXPECT_THROW(in_full.validate(16, windows), Error);
  Batch bad_slot = b;
  bad_slot.groups[0].slot_mapping[0] = 0;  // not the table's block for position 17
  EXPECT_THROW(bad_slot.validate(16, windows), Error);
  Batch out_of_range = b;
  out_of_range.groups[1].block_tables[1] = 16;
  EXPECT_THROW(out_of_range.validate(16, windows), Error);
  const int32_t one[1] = {0};
  EXPECT_THROW(b.validate(16, one), Error);  // a window per group
  // A new token's own block must be held.
  Batch c;
  c.reset(4, 8, 2);
  const std::vector<int32_t> no_block = {-1, -1, -1, -1, -1};
  const std::span<const int32_t> bad[2] = {no_block, full};
  EXPECT_THROW(c.add_sequence(toks, 17, bad, true), Error);
}

// A backend without these ops names the op and itself.
class MinimalBackend final : public Backend {
 public:
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::string name() const override { return "minimal"; }
  DType activation_type() const override { return DType::F32; }
  DType kv_type() const override { return DType::F32; }
  void* alloc(size_t, const std::string&) override { return nullptr; }
  void free(void*) override {}
  void copy_to_device(void*, const void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override {}
  size_t free_memory() const override { return 0; }
  Tensor load_weight(const Tensor& host, const std::string&) override { return host; }
  Tensor load_f32(const float*, int64_t, int64_t, const std::string&) override { return {}; }
  void reserve(const BackendLimits&) override {}
  StepMeta upload_step(const Batch&) override { return {}; }
  void embed(const Tensor&, const StepMeta&, Tensor&) override {}
  void rms_norm(const Tensor&, const Tensor&, float, Tensor&) override {}
  Handoff matmul(const Tensor&, const Tensor&, Tensor&, const Handoff& = {}) override { return {}; }
  void rope_store_kv(Tensor&, Tensor&, const Tensor&, const StepMeta&, const RopeParams&, const KVLayer&) override {}
  Handoff attention(const Tensor&, const KVLayer&, const StepMeta&, const AttentionParams&, Tensor&) override {
    return {};
  }
  void swiglu(const Tensor&, const Tensor&, Tensor&) override {}
  void add(const Tensor&, const Tensor&, Tensor&) override {}
  void gather_rows(const Tensor&, const StepMeta&, Tensor&) override {}
  void sample(const Tensor&, std::span<const SampleRow>, std::span<const PenaltyToken>,
              std::vector<SampleResult>&) override {}
  void synchronize() override {}
};

TEST(CpuFamilyOps, MissingOpsAreErrorsNamingOpAndBackend) {
  MinimalBackend be;
  Tensor t;
  StepMeta m;
  KVLayer kv;
  AttentionParams ap;
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const auto& [op, f] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"add_bias", [&] { be.add_bias(t, t); }},
           {"geglu", [&] { be.geglu(t, t, t); }},
           {"scale", [&] { be.scale(t, 2.0f); }},
           {"softcap", [&] { be.softcap(t, 2.0f); }},
           {"attention_ext", [&] { be.attention_ext(t, kv, m, ap, t); }},
           {"moe_route", [&] { be.moe_route(t, MoeParams(), t, t); }},
           {"moe_ffn", [&] { be.moe_ffn(t, t, t, ExpertWeights(), MoeParams(), t); }}}) {
    const std::string msg = message(f);
    EXPECT_NE(msg.find("'" + op), std::string::npos) << msg;
    EXPECT_NE(msg.find("'minimal'"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace rf
