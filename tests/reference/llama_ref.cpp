// Float64 reference forward (see llama_ref.h).
#include "reference/llama_ref.h"

#include <cmath>
#include <stdexcept>

#include "core/quant.h"

namespace rf::ref {

LlamaRef::Mat LlamaRef::load(const gguf::File& f, const std::string& name, int64_t* rows) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) throw std::runtime_error("missing " + name);
  std::vector<float> tmp(t->n_elements);
  const size_t row_b = row_bytes(t->type, t->ne(0));
  for (uint64_t r = 0; r < t->rows(); ++r)
    dequantize_row(t->type, f.tensor_data(*t) + r * row_b, tmp.data() + r * t->ne(0), t->ne(0));
  if (rows) *rows = int64_t(t->rows());
  return Mat(tmp.begin(), tmp.end());
}

LlamaRef::LlamaRef(const gguf::File& f) {
  const std::string a = f.get_string("general.architecture") + ".";
  n_embd_ = int(f.require_int(a + "embedding_length"));
  n_layer_ = int(f.require_int(a + "block_count"));
  n_head_ = int(f.require_int(a + "attention.head_count"));
  n_kv_ = int(f.get_int(a + "attention.head_count_kv", n_head_));
  hd_ = n_embd_ / n_head_;
  n_ff_ = int(f.require_int(a + "feed_forward_length"));
  n_rot_ = int(f.get_int(a + "rope.dimension_count", hd_));
  eps_ = f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5);
  base_ = f.get_float(a + "rope.freq_base", 10000.0);
  const double factor = f.get_float(a + "rope.scaling.factor", 0.0);
  if (factor > 0 && f.get_string(a + "rope.scaling.type", "linear") == "linear") freq_scale_ = 1.0 / factor;
  int64_t vocab = 0;
  tok_ = load(f, "token_embd.weight", &vocab);
  n_vocab_ = int(vocab);
  out_norm_ = load(f, "output_norm.weight");
  out_ = f.find_tensor("output.weight") ? load(f, "output.weight") : tok_;
  if (f.find_tensor("rope_freqs.weight")) rope_freqs_ = load(f, "rope_freqs.weight");
  for (int l = 0; l < n_layer_; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    layers_.push_back({load(f, p + "attn_norm.weight"), load(f, p + "attn_q.weight"), load(f, p + "attn_k.weight"),
                       load(f, p + "attn_v.weight"), load(f, p + "attn_output.weight"), load(f, p + "ffn_norm.weight"),
                       load(f, p + "ffn_gate.weight"), load(f, p + "ffn_up.weight"), load(f, p + "ffn_down.weight")});
  }
  kcache_.resize(size_t(n_layer_));
  vcache_.resize(size_t(n_layer_));
}

namespace {

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  std::vector<double> o(x.size());
  for (size_t i = 0; i < x.size(); ++i) o[i] = x[i] * s * w[i];
  return o;
}

// y[r] = sum_c W[r, c] x[c] for W of rows x cols.
std::vector<double> matvec(const std::vector<double>& W, const std::vector<double>& x) {
  const size_t cols = x.size(), rows = W.size() / cols;
  std::vector<double> y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

}  // namespace

std::vector<double> LlamaRef::step(int32_t token, int pos) {
  std::vector<double> x(tok_.begin() + int64_t(token) * n_embd_, tok_.begin() + int64_t(token + 1) * n_embd_);
  const int group = n_head_ / n_kv_;
  for (int l = 0; l < n_layer_; ++l) {
    const Layer& L = layers_[size_t(l)];
    std::vector<double> xn = rmsnorm(x, L.attn_norm, eps_);
    std::vector<double> q = matvec(L.wq, xn), k = matvec(L.wk, xn), v = matvec(L.wv, xn);
    // RoPE, normal layout: pairs (2i, 2i+1) within each head.
    auto rope = [&](std::vector<double>& t, int heads) {
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < n_rot_; i += 2) {
          double theta = freq_scale_ * pos * std::pow(base_, -double(i) / n_rot_);
          if (!rope_freqs_.empty()) theta /= rope_freqs_[size_t(i / 2)];
          const double c = std::cos(theta), s = std::sin(theta);
          double& a = t[size_t(h * hd_ + i)];
          double& b = t[size_t(h * hd_ + i + 1)];
          const double a0 = a, b0 = b;
          a = a0 * c - b0 * s;
          b = a0 * s + b0 * c;
        }
    };
    rope(q, n_head_);
    rope(k, n_kv_);
    kcache_[size_t(l)].push_back(k);
    vcache_[size_t(l)].push_back(v);
    std::vector<double> attn(size_t(n_head_ * hd_), 0.0);
    for (int h = 0; h < n_head_; ++h) {
      const int kvh = h / group;
      std::vector<double> sc(size_t(pos + 1));
      double mx = -1e300;
      for (int j = 0; j <= pos; ++j) {
        double s = 0;
        for (int d = 0; d < hd_; ++d) s += q[size_t(h * hd_ + d)] * kcache_[size_t(l)][size_t(j)][size_t(kvh * hd_ + d)];
        sc[size_t(j)] = s / std::sqrt(double(hd_));
        mx = std::max(mx, sc[size_t(j)]);
      }
      double z = 0;
      for (double& s : sc) z += (s = std::exp(s - mx));
      for (int j = 0; j <= pos; ++j)
        for (int d = 0; d < hd_; ++d)
          attn[size_t(h * hd_ + d)] += sc[size_t(j)] / z * vcache_[size_t(l)][size_t(j)][size_t(kvh * hd_ + d)];
    }
    std::vector<double> o = matvec(L.wo, attn);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    xn = rmsnorm(x, L.ffn_norm, eps_);
    std::vector<double> g = matvec(L.gate, xn), u = matvec(L.up, xn);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    std::vector<double> d = matvec(L.down, g);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
  }
  return matvec(out_, rmsnorm(x, out_norm_, eps_));
}

std::vector<double> LlamaRef::feed(const std::vector<int32_t>& tokens) {
  std::vector<double> logits;
  for (int32_t t : tokens) logits = step(t, pos_++);
  return logits;
}

}  // namespace rf::ref
