// Op cases of the row-wise and elementwise ops: rms_norm (rows of the
// residual stream and per-head rows), add_rms_norm (fused, and the plain
// add then rms_norm it replaces), the GLUs (SwiGLU, GeGLU, gpt-oss's
// clamped SwiGLU), add, add_bias, scale (f32, and activations after a
// convert from the residual type), softcap, sigmoid_mul,
// gated_rms_norm, embedding (f16 and quantized tables) and gather_rows.
#include <cmath>

#include "core/quant.h"
#include "op/op_cases.h"
#include "op/op_test_util.h"

namespace rf::test {
namespace {

std::vector<double> rms_norm_ref(const std::vector<float>& x, const std::vector<float>& w, int rows, int d,
                                 double eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(x[size_t(r) * d + i]) * x[size_t(r) * d + i];
    const double s = 1.0 / std::sqrt(ss / d + eps);
    for (int i = 0; i < d; ++i) out[size_t(r) * d + i] = x[size_t(r) * d + i] * s * w[size_t(i)];
  }
  return out;
}

// rows x d of the residual stream (f32 everywhere) normed into activations.
OpCase rms_norm_case(int rows, int d) {
  OpCase c;
  c.name = "rms_norm_r" + std::to_string(rows) + "_d" + std::to_string(d);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {randn(size_t(rows) * d, rng, 3.0f), randn(size_t(d), rng)};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    Tensor x = b.upload(in.f[0], be.residual_type(), d, rows), w = b.f32(in.f[1], d);
    Tensor out = b.zeros(be.activation_type(), d, rows);
    be.rms_norm(x, w, 1e-5f, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) { return RefOutputs{rms_norm_ref(in.f[0], in.f[1], rows, d, 1e-5)}; };
  return c;
}

// Per-head norms (q/k norms): activation rows seen as [rows * heads, hd].
OpCase head_norm_case(int rows, int heads, int hd) {
  OpCase c;
  c.name = "rms_norm_heads_r" + std::to_string(rows) + "_h" + std::to_string(heads) + "_hd" + std::to_string(hd);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {round_f16(randn(size_t(rows) * heads * hd, rng, 2.0f)), randn(size_t(hd), rng)};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor x = b.upload(in.f[0], a, int64_t(heads) * hd, rows), w = b.f32(in.f[1], hd);
    Tensor out = b.zeros(a, int64_t(heads) * hd, rows);
    Tensor xv = x.view2d(hd, int64_t(rows) * heads), ov = out.view2d(hd, int64_t(rows) * heads);
    be.rms_norm(xv, w, 1e-6f, ov);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    return RefOutputs{rms_norm_ref(in.f[0], in.f[1], rows * heads, hd, 1e-6)};
  };
  return c;
}

// x += y, out = rms_norm(x) * w: the fused op, and the plain add then
// rms_norm on a second copy of x. Outputs: x after, the fused out, the plain out.
OpCase add_rms_norm_case(int rows, int d) {
  OpCase c;
  c.name = "add_rms_norm_r" + std::to_string(rows) + "_d" + std::to_string(d);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {randn(size_t(rows) * d, rng, 2.0f), round_f16(randn(size_t(rows) * d, rng)), randn(size_t(d), rng)};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    const DType a = be.activation_type(), r = be.residual_type();
    Tensor x = b.upload(in.f[0], r, d, rows), x2 = b.upload(in.f[0], r, d, rows), y = b.upload(in.f[1], a, d, rows);
    Tensor w = b.f32(in.f[2], d), out = b.zeros(a, d, rows), plain = b.zeros(a, d, rows);
    be.add_rms_norm(x, y, w, 1e-5f, out);
    be.add(x2, y, x2);
    be.rms_norm(x2, w, 1e-5f, plain);
    return OpOutputs{b.read(x), b.read(out), b.read(plain)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<float> sum(in.f[0].size());
    std::vector<double> sumd(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) {
      sumd[i] = double(in.f[0][i]) + in.f[1][i];
      sum[i] = float(sumd[i]);  // the residual stream holds f32
    }
    const auto normed = rms_norm_ref(sum, in.f[2], rows, d, 1e-5);
    return RefOutputs{sumd, normed, normed};
  };
  return c;
}

// out = act(gate) * up over rows of activations. Width 1001 takes the
// one-value-a-thread kernels, 4096 the eight-wide ones.
OpCase glu_case(Activation act, const char* name, int rows, int d) {
  OpCase c;
  c.name = std::string(name) + "_r" + std::to_string(rows) + "_d" + std::to_string(d);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    auto g = randn(size_t(rows) * d, rng, 4.0f);
    g[0] = -12.0f, g[1] = 12.0f;  // GeGLU's saturated ends, the clamp of the clamped SwiGLU
    in.f = {round_f16(g), round_f16(randn(size_t(rows) * d, rng, 3.0f))};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor g = b.upload(in.f[0], a, d, rows), u = b.upload(in.f[1], a, d, rows), out = b.zeros(a, d, rows);
    if (act == Activation::SiLU) be.swiglu(g, u, out);
    else if (act == Activation::GeluTanh) be.geglu(g, u, out);
    else be.swiglu_oai(g, u, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<double> out(in.f[0].size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = glu_reference(act, in.f[0][i], in.f[1][i]);
    return RefOutputs{out};
  };
  return c;
}

// The residual add (f32 += activations) and the bias add of activations.
OpCase add_case(bool bias) {
  const int rows = 5, d = 320;
  OpCase c;
  c.name = bias ? "add_bias_r5_d320" : "add_r5_d320";
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {round_f16(randn(size_t(rows) * d, rng, 2.0f)), round_f16(randn(bias ? size_t(d) : size_t(rows) * d, rng))};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    if (bias) {
      Tensor x = b.upload(in.f[0], be.activation_type(), d, rows), w = b.f32(in.f[1], d);
      be.add_bias(x, w);
      return OpOutputs{b.read(x)};
    }
    Tensor x = b.upload(in.f[0], be.residual_type(), d, rows), y = b.upload(in.f[1], be.activation_type(), d, rows);
    be.add(x, y, x);
    return OpOutputs{b.read(x)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<double> out(in.f[0].size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = double(in.f[0][i]) + in.f[1][bias ? i % size_t(d) : i];
    return RefOutputs{out};
  };
  if (!bias) c.vs_cpu = tol_f32();  // f32 + an f16-exact value: exact in f32 on every backend
  return c;
}

// Gemma 4's per-layer embedding steps: the residual stream (f32 everywhere)
// converted to activations, then scaled in place as activations.
OpCase convert_scale_case() {
  const int rows = 3, d = 520;
  OpCase c;
  c.name = "convert_scale_act_r3_d520";
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {randn(size_t(rows) * d, rng, 4.0f)};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    Tensor x = b.upload(in.f[0], be.residual_type(), d, rows), out = b.zeros(be.activation_type(), d, rows);
    be.convert(x, out);
    const std::vector<float> converted = b.read(out);
    be.scale(out, 0.125f);
    return OpOutputs{converted, b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    RefOutputs out(2, std::vector<double>(in.f[0].size()));
    for (size_t i = 0; i < in.f[0].size(); ++i) {
      out[0][i] = in.f[0][i];
      out[1][i] = in.f[0][i] * 0.125;
    }
    return out;
  };
  return c;  // (f16 activations: the conversion's rounding, 2^-11 of each value)
}

// scale then softcap, in place on f32 logits.
OpCase softcap_case() {
  const int rows = 4, d = 700;
  OpCase c;
  c.name = "scale_softcap_r4_d700";
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {randn(size_t(rows) * d, rng, 20.0f)};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    Tensor x = b.upload(in.f[0], DType::F32, d, rows);
    be.scale(x, 3.5f);
    be.softcap(x, 30.0f);
    return OpOutputs{b.read(x)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<double> out(in.f[0].size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = 30.0 * std::tanh(double(float(in.f[0][i] * 3.5f)) / 30.0);
    return RefOutputs{out};
  };
  c.vs_cpu = tol_f32();
  return c;
}

// out = x * sigmoid(gate): gate of x's shape, or one column.
OpCase sigmoid_mul_case(bool column) {
  const int rows = 6, d = 256;
  OpCase c;
  c.name = column ? "sigmoid_mul_column_r6_d256" : "sigmoid_mul_r6_d256";
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {round_f16(randn(size_t(rows) * d, rng)), round_f16(randn(column ? size_t(rows) : size_t(rows) * d, rng, 2.0f))};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor x = b.upload(in.f[0], a, d, rows), g = b.upload(in.f[1], a, column ? 1 : d, rows), out = b.zeros(a, d, rows);
    be.sigmoid_mul(x, g, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<double> out(in.f[0].size());
    for (size_t i = 0; i < out.size(); ++i) {
      const double g = in.f[1][column ? i / size_t(d) : i];
      out[i] = in.f[0][i] / (1 + std::exp(-g));
    }
    return RefOutputs{out};
  };
  return c;
}

// Per head of hd: rms_norm(x_head) * w * silu(z_head); x f32 on every
// backend (the delta rule's output), z and out activations.
OpCase gated_rms_norm_case() {
  const int rows = 3, heads = 4, hd = 128, d = heads * hd;
  OpCase c;
  c.name = "gated_rms_norm_r3_h4_hd128";
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {round_f16(randn(size_t(rows) * d, rng, 2.0f)), randn(size_t(hd), rng), round_f16(randn(size_t(rows) * d, rng))};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor x = b.f32(in.f[0], d, rows), w = b.f32(in.f[1], hd), z = b.upload(in.f[2], a, d, rows);
    Tensor out = b.zeros(a, d, rows);
    be.gated_rms_norm(x, w, z, 1e-6f, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    auto out = rms_norm_ref(in.f[0], in.f[1], rows * heads, hd, 1e-6);
    for (size_t i = 0; i < out.size(); ++i) out[i] *= double(in.f[2][i]) / (1 + std::exp(-double(in.f[2][i])));
    return RefOutputs{out};
  };
  return c;
}

// Embedding rows of a `type` table (ids repeated, the first and last row),
// then gathering rows 8, 2, 5 of them.
OpCase embed_case(DType type) {
  const int vocab = 50, d = 256;
  const std::vector<int32_t> ids = {3, 49, 0, 7, 7, 12, 1, 2, 40};
  OpCase c;
  c.name = "embed_gather_" + param_name(dtype_name(type));
  for (char& ch : c.name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.w = {random_weight(type, vocab, d, rng, 1.0f)};
    in.batch.reset(16, 1);
    in.batch.add_sequence(ids, 0, std::vector<int32_t>{0}, true);
    in.batch.logits_rows = {8, 2, 5};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    const int n = int(ids.size());
    Tensor table = b.weight(in.w[0], type, d, vocab), out = b.zeros(be.residual_type(), d, n);
    Tensor gathered = b.zeros(be.residual_type(), d, 3);
    const StepMeta m = be.upload_step(in.batch);
    be.embed(table, m, out);
    be.gather_rows(out, m, gathered);
    return OpOutputs{b.read(out), b.read(gathered)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<double> emb, rows;
    std::vector<float> row(d);
    for (int32_t id : ids) {
      dequantize_row(type, in.w[0].data() + size_t(id) * row_bytes(type, d), row.data(), d);
      emb.insert(emb.end(), row.begin(), row.end());
    }
    for (int r : {8, 2, 5}) rows.insert(rows.end(), emb.begin() + long(r) * d, emb.begin() + long(r + 1) * d);
    return RefOutputs{emb, rows};
  };
  c.vs_reference = tol_exact();
  c.vs_cpu = tol_f32();  // dequantized on the device: its own sums of a block's scale and offset
  return c;
}

}  // namespace

void add_elementwise_cases(std::vector<OpCase>& cases) {
  cases.push_back(rms_norm_case(1, 4096));
  cases.push_back(rms_norm_case(7, 300));
  cases.push_back(head_norm_case(5, 4, 128));
  cases.push_back(add_rms_norm_case(1, 2048));
  cases.push_back(add_rms_norm_case(9, 320));
  for (int d : {1001, 4096}) {
    cases.push_back(glu_case(Activation::SiLU, "swiglu", 3, d));
    cases.push_back(glu_case(Activation::GeluTanh, "geglu", 3, d));
    cases.push_back(glu_case(Activation::SiLUClampedOai, "swiglu_oai", 3, d));
  }
  cases.push_back(add_case(false));
  cases.push_back(add_case(true));
  cases.push_back(softcap_case());
  cases.push_back(convert_scale_case());
  cases.push_back(sigmoid_mul_case(false));
  cases.push_back(sigmoid_mul_case(true));
  cases.push_back(gated_rms_norm_case());
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) cases.push_back(embed_case(t));
}

}  // namespace rf::test
