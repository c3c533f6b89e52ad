// Op cases of the matmuls: matmul over every weight format the CPU reads
// at 1, 8 and 64 rows, and the fused gate/up GLU (matmul_gate_up_glu)
// against its definition.
#include <cmath>

#include "core/activation.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "op/op_cases.h"
#include "op/op_test_util.h"

namespace rf::test {
namespace {

// The weight formats matmul reads.
const DType kWeightTypes[] = {
    DType::F32,     DType::F16,    DType::BF16,    DType::Q8_0,   DType::Q4_0,    DType::Q4_1,  DType::Q5_0,
    DType::Q5_1,    DType::Q2_K,   DType::Q3_K,    DType::Q4_K,   DType::Q5_K,    DType::Q6_K,  DType::IQ1_S,
    DType::IQ1_M,   DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,  DType::IQ3_XXS, DType::IQ3_S, DType::IQ4_NL,
    DType::IQ4_XS,  DType::MXFP4,  DType::F8_E4M3_ROW,
};

bool float_weights(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

std::vector<float> dequantized(DType type, const std::vector<uint8_t>& w, int rows, int cols) {
  std::vector<float> out(size_t(rows) * cols);
  const size_t rb = row_bytes(type, uint64_t(cols));
  for (int r = 0; r < rows; ++r) dequantize_row(type, w.data() + r * rb, out.data() + size_t(r) * cols, size_t(cols));
  return out;
}

// out[t, r] = sum_c x[t, c] * w[r, c] in double.
std::vector<double> matmul_ref(const std::vector<float>& x, const std::vector<float>& w, int n, int k, int m) {
  std::vector<double> out(size_t(n) * m);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < m; ++r) {
      double s = 0;
      for (int c = 0; c < k; ++c) s += double(x[size_t(t) * k + c]) * w[size_t(r) * k + c];
      out[size_t(t) * m + r] = s;
    }
  return out;
}

OpCase matmul_case(DType type, int n, int k, int m) {
  OpCase c;
  c.name = param_name("matmul_" + std::string(dtype_name(type)) + "_n" + std::to_string(n) + "_k" +
                      std::to_string(k) + "_m" + std::to_string(m));
  for (char& ch : c.name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f.push_back(round_f16(randn(size_t(n) * k, rng)));
    in.w.push_back(random_weight(type, m, k, rng, 0.5f));
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    BackendLimits lim = step_limits(64, 4, 1, 1, 1, 1);
    lim.max_weight_elems = int64_t(m) * k;
    be.reserve(lim);
    DeviceBuffers b(be);
    const DType act = be.activation_type();
    Tensor x = b.upload(in.f[0], act, k, n), w = b.weight(in.w[0], type, k, m), out = b.zeros(act, m, n);
    be.matmul(x, w, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    return RefOutputs{matmul_ref(in.f[0], dequantized(type, in.w[0], m, k), n, k, m)};
  };
  c.vs_reference = tol_f32();
  c.vs_reference_fast = tol_cpu_fast_matmul(type);
  c.vs_cpu = float_weights(type) ? tol_f16() : tol_quant_matmul();
  return c;
}

double act_ref(Activation a, double g, double u) {
  switch (a) {
    case Activation::SiLU: return g / (1 + std::exp(-g)) * u;
    case Activation::GeluTanh: {
      if (g <= -10) return 0;
      if (g >= 10) return g * u;
      // ggml's evaluation: on g rounded to f16, the result rounded to f16.
      const double x = f16_to_f32(f32_to_f16(float(g)));
      const double gelu = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
      return f16_to_f32(f32_to_f16(float(gelu))) * u;
    }
    case Activation::SiLUClampedOai: {
      const double gg = std::min(g, double(kOaiGluLimit)), uu = std::clamp(u, -double(kOaiGluLimit), double(kOaiGluLimit));
      return gg / (1 + std::exp(-double(kOaiGluAlpha) * gg)) * (uu + 1);
    }
  }
  return 0;
}

// out = act(x . w_gate^T) * (x . w_up^T). The reference takes the products
// as the backend rounds them before the activation (f32 on the CPU), so
// GeGLU's f16 steps see the same gate values.
OpCase gate_up_case(Activation act, const char* act_name, DType type, int n, int k, int ff) {
  OpCase c;
  c.name = std::string("matmul_gate_up_glu_") + act_name + "_" + param_name(dtype_name(type)) + "_n" +
           std::to_string(n);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f.push_back(round_f16(randn(size_t(n) * k, rng)));
    in.w.push_back(random_weight(type, ff, k, rng, 0.1f));
    in.w.push_back(random_weight(type, ff, k, rng, 0.1f));
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    BackendLimits lim = step_limits(64, 4, 1, 1, 1, 1);
    lim.max_weight_elems = int64_t(ff) * k;
    lim.n_embd = k;
    lim.n_ff = ff;
    be.reserve(lim);
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor x = b.upload(in.f[0], a, k, n), wg = b.weight(in.w[0], type, k, ff), wu = b.weight(in.w[1], type, k, ff);
    Tensor gate = b.zeros(a, ff, n), up = b.zeros(a, ff, n), out = b.zeros(a, ff, n);
    be.matmul_gate_up_glu(x, wg, wu, gate, up, out, act);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    const auto g = matmul_ref(in.f[0], dequantized(type, in.w[0], ff, k), n, k, ff);
    const auto u = matmul_ref(in.f[0], dequantized(type, in.w[1], ff, k), n, k, ff);
    std::vector<double> out(g.size());
    for (size_t i = 0; i < g.size(); ++i) out[i] = act_ref(act, double(float(g[i])), double(float(u[i])));
    return RefOutputs{out};
  };
  // GeGLU rounds its GELU to f16: a product a hair from an f16 rounding
  // boundary may round the other way from the reference's (one f16 step,
  // 1e-3 of that value).
  c.vs_reference = act == Activation::GeluTanh ? Tolerance{Metric::RelL2, 1e-4} : tol_f32();
  c.vs_reference_fast = tol_cpu_fast_matmul(type);
  c.vs_cpu = tol_quant_matmul();
  return c;
}

}  // namespace

// The activation's reference, shared with the elementwise GLU cases.
double glu_reference(Activation a, double gate, double up) { return act_ref(a, gate, up); }

void add_matmul_cases(std::vector<OpCase>& cases) {
  for (DType t : kWeightTypes)
    for (int n : {1, 8, 64}) cases.push_back(matmul_case(t, n, 512, 96));
  for (int n : {1, 8}) {
    cases.push_back(gate_up_case(Activation::SiLU, "swiglu", DType::Q8_0, n, 256, 160));
    cases.push_back(gate_up_case(Activation::GeluTanh, "geglu", DType::Q4_K, n, 256, 160));
  }
}

}  // namespace rf::test
