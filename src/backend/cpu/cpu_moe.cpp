// CPU mixture of experts: routing (softmax over every expert, or sigmoid
// gating; a choice-only bias; group-limited choice; top-k, renormalised,
// scaled) and the
// experts' FFNs. moe_ffn groups each step's (token, chosen expert) pairs by
// expert and runs, in waves of gathered rows, every active expert's gate
// and up projections as one matmul pass over their row slices, then the
// downs as another (matmul_jobs; adding the experts' biases where they
// have them); each pair's output lands in its own row of the scratch,
// and a token's output is their weighted sum in the order of its choices
// (as llama.cpp's build_moe_ffn adds them). A token's result depends only on
// its own row and choices, never on the other tokens of the step. Scratch is
// sized by reserve(); nothing is allocated per call.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_qdot.h"
#include "core/error.h"

namespace rf::cpu {
namespace {

// (token, expert) pairs per wave of the expert matmuls: the gathered
// activations and the intermediates of one wave stay in the scratch.
constexpr int64_t kWaveRows = 256;

}  // namespace

void MoeScratch::reserve(const BackendLimits& lim) {
  *this = MoeScratch();
  if (lim.n_expert <= 0) return;
  RF_CHECK(lim.n_expert_used > 0 && lim.n_expert_used <= lim.n_expert && lim.expert_ff > 0 && lim.n_embd > 0 &&
               lim.max_tokens > 0,
           "cpu reserve: bad expert limits (n_expert ", lim.n_expert, ", n_expert_used ", lim.n_expert_used,
           ", expert_ff ", lim.expert_ff, ", n_embd ", lim.n_embd, ", max_tokens ", lim.max_tokens, ")");
  max_rows = int64_t(lim.max_tokens) * lim.n_expert_used;
  n_embd = lim.n_embd;
  n_ff = lim.expert_ff;
  n_expert = lim.n_expert;
  const int64_t chunk = std::min(max_rows, kWaveRows);
  order.resize(size_t(max_rows));
  start.resize(size_t(n_expert) + 1);
  cursor.resize(size_t(n_expert));
  x.resize(size_t(chunk * n_embd));
  gate.resize(size_t(chunk * n_ff));
  up.resize(size_t(chunk * n_ff));
  y_chunk.resize(size_t(chunk * n_embd));
  y.resize(size_t(max_rows * n_embd));
  up_jobs.reserve(size_t(2 * std::min(chunk, n_expert)));
  down_jobs.reserve(size_t(std::min(chunk, n_expert)));
  wave_expert.reserve(size_t(chunk));
  mm.parts.reserve(size_t(2 * std::min(chunk, n_expert)));
  mm.first.reserve(size_t(2 * std::min(chunk, n_expert)) + 1);
}

void moe_route(const Tensor& logits, const MoeParams& p, Tensor& ids, Tensor& weights) {
  const int64_t n = logits.rows(), n_expert = p.n_expert, k = p.n_used;
  RF_CHECK(k >= 1 && k <= n_expert, "moe_route: n_used ", k, " is out of range (1..", n_expert, ")");
  RF_CHECK(logits.type == DType::F32 && logits.cols() == n_expert, "moe_route: router logits are ",
           logits.shape_string(), " ", dtype_name(logits.type), ", expected [", n_expert, ", n] f32");
  RF_CHECK(ids.type == DType::I32 && ids.cols() == k && ids.rows() >= n, "moe_route: ids are ", ids.shape_string(),
           " ", dtype_name(ids.type), ", expected [", k, ", ", n, "] i32");
  RF_CHECK(weights.type == DType::F32 && weights.cols() == k && weights.rows() >= n, "moe_route: weights are ",
           weights.shape_string(), " ", dtype_name(weights.type), ", expected [", k, ", ", n, "] f32");
  const bool sigmoid = p.gating == MoeGating::Sigmoid;
  const float* bias = nullptr;
  if (p.choice_bias.data) {
    RF_CHECK(p.choice_bias.type == DType::F32 && p.choice_bias.numel() == n_expert, "moe_route: choice bias is ",
             p.choice_bias.shape_string(), " ", dtype_name(p.choice_bias.type), ", expected [", n_expert, "] f32");
    bias = p.choice_bias.ptr<float>();
  }
  const int64_t n_group = p.grouped() ? p.n_group : 1, per_group = n_expert / n_group;
  if (p.grouped())
    RF_CHECK(n_group <= 32 && n_expert % n_group == 0 && per_group >= 2 && p.n_group_used >= 1 &&
                 p.n_group_used <= n_group && k <= p.n_group_used * per_group,
             "moe_route: ", n_expert, " experts in ", n_group, " groups (", p.n_group_used, " used) for ", k,
             " choices");
  thread_local std::vector<float> score;
  thread_local std::vector<double> prob;
  score.resize(size_t(n_expert));
  prob.resize(size_t(n_expert));
  for (int64_t t = 0; t < n; ++t) {
    const float* raw = logits.ptr<float>() + t * n_expert;
    int32_t* id = ids.ptr<int32_t>() + t * k;
    float* wt = weights.ptr<float>() + t * k;
    // The probabilities (in double) and what the choice
    // ranks: the logits themselves for plain softmax routing (softmax keeps
    // their order), else probability + choice bias.
    double top = raw[0];
    for (int64_t e = 1; e < n_expert; ++e) top = std::max(top, double(raw[e]));
    double sum = 0;
    if (!sigmoid)
      for (int64_t e = 0; e < n_expert; ++e) sum += std::exp(double(raw[e]) - top);
    for (int64_t e = 0; e < n_expert; ++e) {
      const double pr = sigmoid ? 1.0 / (1.0 + std::exp(-double(raw[e]))) : std::exp(double(raw[e]) - top) / sum;
      prob[size_t(e)] = pr;
      score[size_t(e)] = p.plain_routing() ? raw[e] : float(pr) + (bias ? bias[e] : 0.0f);
    }
    if (p.grouped()) {  // the groups of the best sums of two scores; the others' experts out of the choice
      float gscore[32];
      for (int64_t g = 0; g < n_group; ++g) {
        float a = -INFINITY, b = -INFINITY;  // the best two
        for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
          const float s_e = score[size_t(e)];
          if (s_e > a) b = a, a = s_e;
          else if (s_e > b) b = s_e;
        }
        gscore[g] = a + b;
      }
      uint32_t chosen_groups = 0;
      for (int64_t j = 0; j < p.n_group_used; ++j) {
        int64_t best = -1;
        for (int64_t g = 0; g < n_group; ++g)
          if (!(chosen_groups >> g & 1u) && (best < 0 || gscore[g] > gscore[best])) best = g;
        chosen_groups |= 1u << best;
      }
      for (int64_t e = 0; e < n_expert; ++e)
        if (!(chosen_groups >> (e / per_group) & 1u)) score[size_t(e)] = -INFINITY;
    }
    // The k best scores in descending order, ties to the lower index: each
    // pick is the best expert after the previous pick (experts out of the
    // choice, at -inf, come after every other).
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      float best_s = 0.0f;
      const float prev_s = j > 0 ? score[size_t(id[j - 1])] : 0.0f;
      for (int64_t e = 0; e < n_expert; ++e) {
        const float s_e = score[size_t(e)];
        if (j > 0) {
          const int64_t prev = id[j - 1];
          const bool after = s_e < prev_s || (s_e == prev_s && e > prev);
          if (!after) continue;
        }
        if (best < 0 || s_e > best_s) best = e, best_s = s_e;
      }
      RF_CHECK(best >= 0, "moe_route: token ", t, "'s router logits are not all numbers");
      id[j] = int32_t(best);
    }
    double chosen = 0;
    for (int64_t j = 0; j < k; ++j) chosen += prob[size_t(id[j])];
    const double denom = p.norm_weights ? chosen : 1.0;
    for (int64_t j = 0; j < k; ++j) wt[j] = float(prob[size_t(id[j])] / denom * p.weights_scale);
  }
}

void moe_ffn(ThreadPool& pool, const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w,
             const MoeParams& p, Tensor& out, MoeScratch& s, const KernelSet& ks) {
  const int64_t n = x.rows(), d = x.cols(), k = p.n_used, ff = p.n_ff, n_expert = p.n_expert;
  RF_CHECK(x.type == DType::F32 && out.type == DType::F32, "moe_ffn: activations must be f32");
  RF_CHECK(out.cols() == d && out.rows() >= n, "moe_ffn: out is ", out.shape_string(), ", expected [", d, ", ", n, "]");
  RF_CHECK(ids.type == DType::I32 && ids.cols() == k && ids.rows() >= n && weights.type == DType::F32 &&
               weights.cols() == k && weights.rows() >= n,
           "moe_ffn: ids ", ids.shape_string(), " and weights ", weights.shape_string(), ", expected [", k, ", ", n,
           "] i32 and f32");
  RF_CHECK(w.n_expert == n_expert && w.gate.cols() == d && w.up.cols() == d && w.down.cols() == ff &&
               w.gate.rows() == n_expert * ff && w.up.rows() == n_expert * ff && w.down.rows() == n_expert * d,
           "moe_ffn: expert weights gate ", w.gate.shape_string(), ", up ", w.up.shape_string(), ", down ",
           w.down.shape_string(), " do not fit ", n_expert, " experts of ffn ", ff, " and embd ", d);
  RF_CHECK(!w.has_biases() || (w.gate_bias.type == DType::F32 && w.up_bias.type == DType::F32 &&
                                w.down_bias.type == DType::F32 && w.gate_bias.numel() == n_expert * ff &&
                                w.up_bias.numel() == n_expert * ff && w.down_bias.numel() == n_expert * d),
           "moe_ffn: expert biases must be f32 [", ff, ", ", n_expert, "] (gate, up) and [", d, ", ", n_expert,
           "] (down)");
  RF_CHECK(n * k <= s.max_rows && d <= s.n_embd && ff <= s.n_ff && n_expert <= s.n_expert, "moe_ffn: ", n,
           " tokens x ", k, " experts (ffn ", ff, ", embd ", d, ") exceed the scratch reserved for ", s.max_rows,
           " (reserve() with BackendLimits' expert fields)");
  const int32_t* id = ids.ptr<int32_t>();
  // Each expert's (token, choice) pairs t * k + j, in token order.
  std::fill(s.start.begin(), s.start.begin() + n_expert + 1, 0);
  for (int64_t r = 0; r < n * k; ++r) {
    RF_CHECK(id[r] >= 0 && id[r] < n_expert, "moe_ffn: token ", r / k, " chose expert ", id[r], " of ", n_expert);
    ++s.start[size_t(id[r]) + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) s.start[size_t(e) + 1] += s.start[size_t(e)];
  std::copy(s.start.begin(), s.start.begin() + n_expert, s.cursor.begin());
  for (int64_t r = 0; r < n * k; ++r) s.order[size_t(s.cursor[size_t(id[r])]++)] = int32_t(r);

  // Waves of up to kWaveRows pairs in expert order: each active expert's
  // rows of the wave gathered, then one matmul pass for every expert's gate
  // and up, the GLU, one pass for the downs (so a decode step's hand-offs
  // between threads do not grow with the experts it chose).
  const int64_t P = n * k;
  for (int64_t w0 = 0; w0 < P; w0 += kWaveRows) {
    const int64_t w1 = std::min(P, w0 + kWaveRows), m = w1 - w0;
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(s.x.data() + r * d, x.ptr<float>() + (s.order[size_t(w0 + r)] / k) * d, size_t(d) * 4);
    s.up_jobs.clear();
    s.down_jobs.clear();
    s.wave_expert.clear();
    for (int64_t e = 0; e < n_expert; ++e) {
      const int64_t lo = std::max<int64_t>(w0, s.start[size_t(e)]), hi = std::min<int64_t>(w1, s.start[size_t(e) + 1]);
      if (lo >= hi) continue;
      const int64_t at = lo - w0, rows = hi - lo;
      const Tensor xe = make_tensor(s.x.data() + at * d, DType::F32, d, rows);
      const Tensor ge = make_tensor(s.gate.data() + at * ff, DType::F32, ff, rows);
      const Tensor ue = make_tensor(s.up.data() + at * ff, DType::F32, ff, rows);
      s.up_jobs.push_back({xe, w.gate_of(int32_t(e)), ge});
      s.up_jobs.push_back({xe, w.up_of(int32_t(e)), ue});
      s.down_jobs.push_back({ge, w.down_of(int32_t(e)), make_tensor(s.y_chunk.data() + at * d, DType::F32, d, rows)});
      for (int64_t r = 0; r < rows; ++r) s.wave_expert.push_back(int32_t(e));
    }
    matmul_jobs(pool, s.up_jobs, s.mm, ks);
    float* g = s.gate.data();
    float* u = s.up.data();
    for (int64_t r = 0; r < m; ++r) {
      float* gr = g + r * ff;
      float* ur = u + r * ff;
      const int64_t e = s.wave_expert[size_t(r)];
      if (w.has_biases()) {
        const float* bg = w.gate_bias.ptr<float>() + e * ff;
        const float* bu = w.up_bias.ptr<float>() + e * ff;
        for (int64_t i = 0; i < ff; ++i) gr[i] += bg[i], ur[i] += bu[i];
      }
      for (int64_t i = 0; i < ff; ++i) {
        switch (p.act) {
          case Activation::GeluTanh: gr[i] = gelu_tanh_f16(gr[i]) * ur[i]; break;
          case Activation::SiLUClampedOai: gr[i] = glu_oai(gr[i], ur[i]); break;
          case Activation::SiLU: gr[i] = gr[i] / (1.0f + std::exp(-gr[i])) * ur[i]; break;
        }
      }
    }
    matmul_jobs(pool, s.down_jobs, s.mm, ks);
    for (int64_t r = 0; r < m; ++r) {
      float* yr = s.y_chunk.data() + r * d;
      if (w.has_biases()) {
        const float* bd = w.down_bias.ptr<float>() + int64_t(s.wave_expert[size_t(r)]) * d;
        for (int64_t i = 0; i < d; ++i) yr[i] += bd[i];
      }
      std::memcpy(s.y.data() + int64_t(s.order[size_t(w0 + r)]) * d, yr, size_t(d) * 4);
    }
  }

  // out[t] = sum_j weights[t, j] * y[t * k + j], added in the order j.
  const float* wt = weights.ptr<float>();
  pool.parallel_for(size_t(n), 4, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* o = out.ptr<float>() + int64_t(t) * d;
      const float* y = s.y.data() + int64_t(t) * k * d;
      const float* tw = wt + int64_t(t) * k;
      for (int64_t i = 0; i < d; ++i) o[i] = tw[0] * y[i];
      for (int64_t j = 1; j < k; ++j)
        for (int64_t i = 0; i < d; ++i) o[i] += tw[j] * y[j * d + i];
    }
  });
}

}  // namespace rf::cpu
