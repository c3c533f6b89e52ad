// The Handoff contract of the Backend interface (backend/backend.h), on the
// CPU reference: what a fused op hands over goes to the op that reads the
// tensor as an argument. The CPU hands over nothing, and its fused ops with
// their Handoffs passed on match the ops they compose; the defaults in
// backend.cpp pass each Handoff on in order (a recording backend checks
// which one each matmul got); a Handoff of another tensor, or one whose
// norm is pending given to an op that does not apply it, is an error naming
// the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "random_values.h"

namespace rf {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// One row through o projection + residual + norm, then q/k/v and gate*up,
// fused (with each Handoff passed on) and op by op: the same values, and
// nothing handed over.
TEST(CpuHandoff, FusedOpsWithHandoffsMatchTheOpsTheyCompose) {
  std::mt19937 rng(5);
  CpuBackend cpu(1);
  const int d = 64, in = 32, ff = 48, n = 2;
  auto wo = test::randn(size_t(d) * in, rng, 0.1f), wq = test::randn(size_t(d) * d, rng, 0.1f),
       wk = test::randn(size_t(16) * d, rng, 0.1f), wg = test::randn(size_t(ff) * d, rng, 0.1f),
       wu = test::randn(size_t(ff) * d, rng, 0.1f), gain = test::randn(size_t(d), rng);
  const auto x = test::randn(size_t(n) * in, rng), residual0 = test::randn(size_t(n) * d, rng);
  const Tensor two = make_tensor(wo.data(), DType::F32, in, d), tq = make_tensor(wq.data(), DType::F32, d, d),
               tk = make_tensor(wk.data(), DType::F32, d, 16), tg = make_tensor(wg.data(), DType::F32, d, ff),
               tu = make_tensor(wu.data(), DType::F32, d, ff), tgain = make_tensor(gain.data(), DType::F32, d);
  struct Out {
    std::vector<float> res, next, q, k, glu;
  };
  const auto run = [&](bool fused) {
    Out o{residual0, std::vector<float>(size_t(n) * d), std::vector<float>(size_t(n) * d),
          std::vector<float>(size_t(n) * 16), std::vector<float>(size_t(n) * ff)};
    std::vector<float> xv = x, proj(size_t(n) * d), g(size_t(n) * ff), u(size_t(n) * ff);
    Tensor tx = make_tensor(xv.data(), DType::F32, in, n), tproj = make_tensor(proj.data(), DType::F32, d, n),
           tres = make_tensor(o.res.data(), DType::F32, d, n), tnext = make_tensor(o.next.data(), DType::F32, d, n),
           tqo = make_tensor(o.q.data(), DType::F32, d, n), tko = make_tensor(o.k.data(), DType::F32, 16, n),
           tgo = make_tensor(g.data(), DType::F32, ff, n), tuo = make_tensor(u.data(), DType::F32, ff, n),
           tglu = make_tensor(o.glu.data(), DType::F32, ff, n);
    const Tensor ws[2] = {tq, tk}, ffn[2] = {tg, tu};
    Tensor outs[2] = {tqo, tko};
    if (fused) {
      const Handoff h = cpu.matmul_add_rms_norm(tx, two, tproj, tres, tgain, 1e-5f, tnext, ffn);
      EXPECT_FALSE(h.norm_pending);
      EXPECT_EQ(h.copy, 0u);
      const Handoff after = cpu.matmul_multi(tnext, ws, outs, {}, h);
      EXPECT_EQ(after.copy, 0u);
      cpu.matmul_gate_up_glu(tnext, tg, tu, tgo, tuo, tglu, Activation::SiLU, after);
    } else {
      cpu.matmul(tx, two, tproj);
      cpu.add(tres, tproj, tres);
      cpu.rms_norm(tres, tgain, 1e-5f, tnext);
      cpu.matmul(tnext, tq, tqo);
      cpu.matmul(tnext, tk, tko);
      cpu.matmul(tnext, tg, tgo);
      cpu.matmul(tnext, tu, tuo);
      cpu.swiglu(tgo, tuo, tglu);
    }
    return o;
  };
  const Out fused = run(true), plain = run(false);
  EXPECT_EQ(max_diff(fused.res, plain.res), 0.0f);
  EXPECT_EQ(max_diff(fused.next, plain.next), 0.0f);
  EXPECT_EQ(max_diff(fused.q, plain.q), 0.0f);
  EXPECT_EQ(max_diff(fused.k, plain.k), 0.0f);
  EXPECT_EQ(max_diff(fused.glu, plain.glu), 0.0f);
}

TEST(CpuHandoff, WrongHandoffsAreErrorsNamingTheOp) {
  std::mt19937 rng(6);
  CpuBackend cpu(1);
  auto xv = test::randn(64, rng), wv = test::randn(64 * 8, rng), ov = std::vector<float>(16), other = xv;
  Tensor x = make_tensor(xv.data(), DType::F32, 64, 1), w = make_tensor(wv.data(), DType::F32, 64, 8),
         o = make_tensor(ov.data(), DType::F32, 8, 2), y = make_tensor(other.data(), DType::F32, 64, 1);
  Handoff pending;
  pending.data = x.data;
  pending.norm_pending = true;
  pending.norm_eps = 1e-5f;
  const Tensor ws[1] = {w};
  Tensor outs[1] = {o};
  // A norm left to the reader: only a reader that applies it takes it.
  for (const auto& [op, f] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"matmul", [&] { cpu.matmul(x, w, o, pending); }},
           {"matmul_multi", [&] { cpu.matmul_multi(x, ws, outs, {}, pending); }},
           {"matmul_gate_up_glu", [&] { cpu.matmul_gate_up_glu(x, w, w, o, o, o, Activation::SiLU, pending); }}}) {
    const std::string msg = error_of(f);
    EXPECT_NE(msg.find(op + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find("RMSNorm"), std::string::npos) << msg;
  }
  // A Handoff is for the tensor it describes.
  Handoff of_x;
  of_x.data = x.data;
  const std::string msg = error_of([&] { cpu.matmul(y, w, o, of_x); });
  EXPECT_NE(msg.find("another tensor"), std::string::npos) << msg;
  EXPECT_EQ(error_of([&] { cpu.matmul(x, w, o, of_x); }), "no error");
}

// A backend whose matmul hands over a numbered Handoff of its x and
// records the number it was handed: the defaults must pass each matmul's
// Handoff to the next matmul of the same x, and the first one the caller's.
class HandingCpu final : public CpuBackend {
 public:
  HandingCpu() : CpuBackend(1) {}
  std::vector<uint64_t> given;
  uint64_t next = 100;
  Handoff matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in = {}) override {
    CpuBackend::matmul(x, w, out, Handoff{x_in.data, false, 0.0f, 0});
    given.push_back(x_in.copy);
    return Handoff{x.data, false, 0.0f, ++next};
  }
  Handoff add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) override {
    CpuBackend::add_rms_norm(x, y, w, eps, out);
    return Handoff{out.data, false, 0.0f, 7};
  }
  // The CPU fuses these two; the defaults under test compose matmul.
  Handoff matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                       std::span<const Tensor> biases, const Handoff& x_in = {}) override {
    return Backend::matmul_multi(x, ws, outs, biases, x_in);
  }
  void matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate, Tensor& up,
                          Tensor& out, Activation act, const Handoff& x_in = {}) override {
    Backend::matmul_gate_up_glu(x, w_gate, w_up, gate, up, out, act, x_in);
  }
};

TEST(CpuHandoff, DefaultsPassEachHandoffOnInOrder) {
  std::mt19937 rng(7);
  HandingCpu be;
  auto xv = test::randn(32, rng), wv = test::randn(32 * 4, rng), gain = test::randn(4, rng), wo = test::randn(4 * 32, rng);
  std::vector<float> o1(4), o2(4), o3(4), res(4), next(4), glu(4), proj(4);
  Tensor x = make_tensor(xv.data(), DType::F32, 32, 1), w = make_tensor(wv.data(), DType::F32, 32, 4);
  Tensor t1 = make_tensor(o1.data(), DType::F32, 4, 1), t2 = make_tensor(o2.data(), DType::F32, 4, 1),
         t3 = make_tensor(o3.data(), DType::F32, 4, 1);
  const Tensor ws[3] = {w, w, w};
  Tensor outs[3] = {t1, t2, t3};
  const Handoff in{x.data, false, 0.0f, 42};
  const Handoff after = be.matmul_multi(x, ws, outs, {}, in);
  EXPECT_EQ(be.given, (std::vector<uint64_t>{42, 101, 102}));
  EXPECT_EQ(after.copy, 103u);
  be.given.clear();
  Tensor tglu = make_tensor(glu.data(), DType::F32, 4, 1);
  be.matmul_gate_up_glu(x, w, w, t1, t2, tglu, Activation::SiLU, after);
  EXPECT_EQ(be.given, (std::vector<uint64_t>{103, 104}));
  // matmul_add_rms_norm: x's Handoff to its matmul, the norm's for next.
  be.given.clear();
  Tensor x4 = make_tensor(xv.data(), DType::F32, 32, 1), wo4 = make_tensor(wo.data(), DType::F32, 32, 4),
         tproj = make_tensor(proj.data(), DType::F32, 4, 1), tres = make_tensor(res.data(), DType::F32, 4, 1),
         tnext = make_tensor(next.data(), DType::F32, 4, 1), tgain = make_tensor(gain.data(), DType::F32, 4);
  const Handoff to_next = be.matmul_add_rms_norm(x4, wo4, tproj, tres, tgain, 1e-5f, tnext, {}, in);
  EXPECT_EQ(be.given, (std::vector<uint64_t>{42}));
  EXPECT_EQ(to_next.copy, 7u);
  EXPECT_EQ(to_next.data, tnext.data);
}

}  // namespace
}  // namespace rf
