// Looking up, validating and loading model tensors.
#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "model/synthetic.h"

namespace rf {
namespace {

struct Loader {
  const gguf::File& f;
  Backend& backend;
  ShardSpec shard;
  std::vector<std::vector<uint8_t>>& parts;  // host copies of non-contiguous parts
  const std::function<void(uint64_t, uint64_t)>& progress;
  uint64_t done = 0, total = 0;  // file bytes read, of all
  uint64_t loaded = 0;           // bytes on the backend
  std::unordered_set<std::string> used;
  std::unique_ptr<ThreadPool> fill_pool;  // dummy weights' quantization, made on first use

  const gguf::TensorInfo& info(const std::string& name, std::vector<uint64_t> shape) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    RF_CHECK(t, "model is missing tensor '", name, "'");
    used.insert(name);
    bool ok = true;
    for (size_t i = 0; i < 4; ++i) ok = ok && t->ne(i) == (i < shape.size() ? shape[i] : 1);
    if (!ok) {
      gguf::TensorInfo expect;
      expect.dims = shape;
      fail("tensor '", name, "' has shape ", t->shape_string(), ", expected ", expect.shape_string());
    }
    return *t;
  }

  Tensor host_view(const gguf::TensorInfo& t) const {
    return make_tensor(const_cast<uint8_t*>(f.tensor_data(t)), t.type, int64_t(t.ne(0)), int64_t(t.rows()));
  }

  void advance(uint64_t n) {
    done += n;
    if (progress) progress(done, total);
  }

  Tensor upload(const Tensor& host, const std::string& name) {
    Tensor out = backend.load_weight(host, name);
    loaded += out.bytes();
    return out;
  }

  // A header without data (--load-format dummy): a weight of `cols` x `rows`
  // made on the backend, random values (uniform, standard deviation
  // 1/sqrt(cols), as synthetic models have) quantized to the tensor's type
  // on the host for a few rows and repeated over the rest. How many rows
  // repeat depends on the shape alone, so every type holds the same values
  // (what comparisons between types, such as KL divergences, need).
  Tensor dummy(const gguf::TensorInfo& t, int64_t cols, int64_t n_rows, const std::string& name) {
    void* p = backend.alloc(row_bytes(t.type, uint64_t(cols)) * size_t(n_rows), name);
    fill_dummy(t, cols, n_rows, name, static_cast<uint8_t*>(p));
    return make_tensor(p, t.type, cols, n_rows, backend.device());
  }

  // dummy()'s values written to backend memory at `dst`.
  void fill_dummy(const gguf::TensorInfo& t, int64_t cols, int64_t n_rows, const std::string& name, uint8_t* dst) {
    const size_t rb = row_bytes(t.type, uint64_t(cols)), bytes = rb * size_t(n_rows);
    const int64_t pattern_rows = std::clamp<int64_t>(int64_t((size_t(2) << 20) / size_t(cols)), 1, n_rows);
    const int64_t chunk_rows = std::max<int64_t>(1, int64_t((size_t(64) << 20) / rb)) / pattern_rows * pattern_rows;
    std::vector<uint8_t> chunk(rb * size_t(std::min(chunk_rows, n_rows)));
    const uint64_t seed = std::hash<std::string>{}(name);
    // The pattern's rows on every host thread (a 9B model's ~300 tensors of
    // 2M values each take ~30 s of quantization on one).
    if (!fill_pool) fill_pool = std::make_unique<ThreadPool>();
    synthetic_rows(*fill_pool, t.type, seed, cols, pattern_rows, std::sqrt(3.0f / float(cols)), chunk.data());
    for (size_t at = size_t(pattern_rows) * rb; at < chunk.size(); at += size_t(pattern_rows) * rb)
      std::memcpy(chunk.data() + at, chunk.data(), std::min(size_t(pattern_rows) * rb, chunk.size() - at));
    for (size_t done = 0; done < bytes; done += chunk.size())
      backend.copy_to_device(dst + done, chunk.data(), std::min(chunk.size(), bytes - done));
    loaded += bytes;
  }

  // Rows `ranges` of a weight of `shape` (ne[0] first) seen as a matrix of
  // its rows (a 3-D tensor's matrices stacked along rows, each whole, as
  // blocks run along ne[0] in every format), one after another; empty
  // ranges: every row.
  Tensor rows(const std::string& name, std::vector<uint64_t> shape, const std::vector<IndexRange>& ranges = {}) {
    const gguf::TensorInfo& t = info(name, std::move(shape));
    advance(t.n_bytes);
    if (f.header_only()) {
      int64_t n = 0;
      for (const IndexRange& r : ranges) n += r.count;
      return dummy(t, int64_t(t.ne(0)), ranges.empty() ? int64_t(t.rows()) : n, name);
    }
    const Tensor host = host_view(t);
    if (ranges.empty()) return upload(host, name);
    if (ranges.size() == 1) return upload(host.slice_rows(ranges[0].first, ranges[0].count), name);
    return upload(copy_row_ranges(host, ranges, keep()), name);
  }

  // Columns [r.first, r.first + r.count) of every row of a weight of `shape`.
  Tensor columns(const std::string& name, std::vector<uint64_t> shape, IndexRange r) {
    const gguf::TensorInfo& t = info(name, std::move(shape));
    advance(t.n_bytes);
    if (shard.split()) check_column_split(t.type, r.first, r.count, int64_t(t.ne(0)), name);
    if (f.header_only()) return dummy(t, shard.split() ? r.count : int64_t(t.ne(0)), int64_t(t.rows()), name);
    if (!shard.split()) return upload(host_view(t), name);
    return upload(copy_columns(host_view(t), r.first, r.count, name, keep()), name);
  }

  Tensor matrix(const std::string& name, int64_t cols, int64_t n_rows, const std::vector<IndexRange>& ranges = {}) {
    return rows(name, {uint64_t(cols), uint64_t(n_rows)}, ranges);
  }

  // A matrix of `cols` x `n_rows` with the rows `ranges` of it to load
  // (empty: all), for packed().
  struct Part {
    std::string name;
    int64_t n_rows;
    std::vector<IndexRange> ranges;
  };

  // The parts' rows one after another in one backend allocation
  // (Backend::packs_qkv: q/k/v, gate/up), each part as matrix() would load
  // it; null when the parts' formats differ (then each loads on its own).
  Tensor packed(const std::vector<Part>& parts, int64_t cols, const std::string& name) {
    std::vector<const gguf::TensorInfo*> infos;
    int64_t total = 0;
    for (const Part& part : parts) {
      infos.push_back(&info(part.name, {uint64_t(cols), uint64_t(part.n_rows)}));
      if (infos.back()->type != infos[0]->type) return Tensor{};
      int64_t n = part.ranges.empty() ? part.n_rows : 0;
      for (const IndexRange& r : part.ranges) n += r.count;
      total += n;
    }
    const DType type = infos[0]->type;
    const size_t rb = row_bytes(type, uint64_t(cols));
    auto* dst = static_cast<uint8_t*>(backend.alloc(rb * size_t(total), name));
    size_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const gguf::TensorInfo& t = *infos[i];
      advance(t.n_bytes);
      std::vector<IndexRange> ranges = parts[i].ranges;
      if (ranges.empty()) ranges.push_back(IndexRange{0, parts[i].n_rows});
      if (f.header_only()) {
        int64_t n = 0;
        for (const IndexRange& r : ranges) n += r.count;
        fill_dummy(t, cols, n, parts[i].name, dst + at);
        at += rb * size_t(n);
        continue;
      }
      for (const IndexRange& r : ranges) {
        backend.copy_to_device(dst + at, host_view(t).slice_rows(r.first, r.count).data, rb * size_t(r.count));
        at += rb * size_t(r.count);
        loaded += rb * size_t(r.count);
      }
    }
    return make_tensor(dst, type, cols, total, backend.device());
  }

  // A small 2-D f32 tensor (biases per expert): `cols` x `n_rows` on the backend.
  Tensor matrix_f32(const std::string& name, int64_t cols, int64_t n_rows) {
    const gguf::TensorInfo& t = info(name, {uint64_t(cols), uint64_t(n_rows)});
    std::vector<float> v(size_t(cols * n_rows));
    if (f.header_only()) {
      synthetic_values(std::hash<std::string>{}(name), 0, 0.1f, v.data(), v.size());
    } else {
      dequantize_row(t.type, f.tensor_data(t), v.data(), v.size());
    }
    advance(t.n_bytes);
    Tensor out = backend.load_f32(v.data(), cols, n_rows, name);
    loaded += out.bytes();
    return out;
  }

  // Columns [first, first + count) of every row of a weight of `shape`, as
  // a matrix of its own (per_layer_token_embd's columns of one layer).
  Tensor column_part(const std::string& name, std::vector<uint64_t> shape, int64_t first, int64_t count) {
    const gguf::TensorInfo& t = info(name, std::move(shape));
    check_column_split(t.type, first, count, int64_t(t.ne(0)), name);
    if (first == 0) advance(t.n_bytes);
    if (f.header_only()) return dummy(t, count, int64_t(t.rows()), name + " part");
    return upload(copy_columns(host_view(t), first, count, name, keep()), name);
  }

  // An f32 vector's values on the host.
  std::vector<float> host_f32(const std::string& name, int64_t n) {
    const gguf::TensorInfo& t = info(name, {uint64_t(n)});
    std::vector<float> v(static_cast<size_t>(n));
    if (f.header_only()) {
      synthetic_values(std::hash<std::string>{}(name), 0, 0.1f, v.data(), v.size());
      for (float& x : v) x += 1.0f;
    } else {
      dequantize_row(t.type, f.tensor_data(t), v.data(), size_t(n));
    }
    advance(t.n_bytes);
    return v;
  }

  Tensor f32_on_backend(const std::vector<float>& v, const std::string& name) {
    Tensor out = backend.load_f32(v.data(), int64_t(v.size()), 1, name);
    loaded += out.bytes();
    return out;
  }

  // A new host buffer for a rank's copied part.
  std::vector<uint8_t>& keep() { return parts.emplace_back(); }

  // Norm weights, biases and rope factors: always f32 on the backend; the
  // elements of `ranges` one after another (empty: all).
  Tensor vector_f32(const std::string& name, int64_t n, const std::vector<IndexRange>& ranges = {}) {
    const gguf::TensorInfo& t = info(name, {uint64_t(n)});
    std::vector<float> v(static_cast<size_t>(n));
    if (f.header_only()) {  // dummy weights: norms near 1, biases near 0
      synthetic_values(std::hash<std::string>{}(name), 0, 0.1f, v.data(), v.size());
      if (name.find("norm") != std::string::npos)
        for (float& x : v) x += 1.0f;
    } else {
      dequantize_row(t.type, f.tensor_data(t), v.data(), size_t(n));
    }
    advance(t.n_bytes);
    if (!ranges.empty()) {
      std::vector<float> part;
      for (const IndexRange& r : ranges) part.insert(part.end(), v.begin() + r.first, v.begin() + r.first + r.count);
      v.swap(part);
    }
    Tensor out = backend.load_f32(v.data(), int64_t(v.size()), 1, name);
    loaded += out.bytes();
    return out;
  }
};

// A Gated DeltaNet layer's weights (blk.N. prefix p).
void load_recurrent_mixer(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t ch = c.ssm_conv_channels(), inner = c.ssm_inner(), vh = c.ssm_v_heads;
  l.ssm_in = L.matrix(p + "attn_qkv.weight", c.n_embd, ch);
  l.ssm_z = L.matrix(p + "attn_gate.weight", c.n_embd, inner);
  l.ssm_beta = L.matrix(p + "ssm_beta.weight", c.n_embd, vh);
  l.ssm_alpha = L.matrix(p + "ssm_alpha.weight", c.n_embd, vh);
  l.ssm_conv = L.matrix_f32(p + "ssm_conv1d.weight", c.ssm_conv_kernel, ch);
  l.ssm_dt_bias = L.vector_f32(p + "ssm_dt.bias", vh);
  l.ssm_a = L.vector_f32(p + "ssm_a", vh);
  l.ssm_norm = L.vector_f32(p + "ssm_norm.weight", c.ssm_head_dim);
  l.ssm_out = L.matrix(p + "ssm_out.weight", inner, c.n_embd);
}

// Full attention with an output gate: attn_q (or the q part of a fused
// attn_qkv) holds per head head_dim query rows, then head_dim gate rows;
// the query rows become wq, the gate rows w_attn_gate (copied apart at load
// time, so that both are plain matrices).
void load_gated_attention(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l, bool pack) {
  const int64_t hd = c.head_dim, q2 = 2 * int64_t(c.q_dim()), kv = c.kv_dim();
  std::vector<IndexRange> q_rows, gate_rows;
  for (int64_t h = 0; h < c.n_head; ++h) {
    q_rows.push_back({2 * h * hd, hd});
    gate_rows.push_back({2 * h * hd + hd, hd});
  }
  if (L.f.find_tensor(p + "attn_qkv.weight")) {  // q and gate, then k, then v
    const std::string n = p + "attn_qkv.weight";
    l.wq = L.matrix(n, c.n_embd, q2 + 2 * kv, q_rows);
    l.w_attn_gate = L.matrix(n, c.n_embd, q2 + 2 * kv, gate_rows);
    l.wk = L.matrix(n, c.n_embd, q2 + 2 * kv, {IndexRange{q2, kv}});
    l.wv = L.matrix(n, c.n_embd, q2 + 2 * kv, {IndexRange{q2 + kv, kv}});
    l.fused_qkv = true;
    return;
  }
  if (pack) {  // q, k, v and the gate rows adjacent (Backend::packs_qkv)
    const Tensor all = L.packed({{p + "attn_q.weight", q2, q_rows},
                                 {p + "attn_k.weight", kv, {}},
                                 {p + "attn_v.weight", kv, {}},
                                 {p + "attn_q.weight", q2, gate_rows}},
                                c.n_embd, p + "attn_qkv_gate (packed)");
    if (all.data) {
      l.wq = all.slice_rows(0, c.q_dim());
      l.wk = all.slice_rows(c.q_dim(), kv);
      l.wv = all.slice_rows(c.q_dim() + kv, kv);
      l.w_attn_gate = all.slice_rows(c.q_dim() + 2 * kv, c.q_dim());
      return;
    }
  }
  l.wq = L.matrix(p + "attn_q.weight", c.n_embd, q2, q_rows);
  l.w_attn_gate = L.matrix(p + "attn_q.weight", c.n_embd, q2, gate_rows);
  l.wk = L.matrix(p + "attn_k.weight", c.n_embd, kv);
  l.wv = L.matrix(p + "attn_v.weight", c.n_embd, kv);
}

// The shared expert and its scale's weight vector.
void load_shared_expert(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t ff = c.n_ff_shexp;
  l.shexp_gate = L.matrix(p + "ffn_gate_shexp.weight", c.n_embd, ff);
  l.shexp_up = L.matrix(p + "ffn_up_shexp.weight", c.n_embd, ff);
  l.shexp_down = L.matrix(p + "ffn_down_shexp.weight", ff, c.n_embd);
  l.shexp_gate_inp = L.matrix(p + "ffn_gate_inp_shexp.weight", c.n_embd, 1);
}

// Attention of a layer with its own shapes (ModelConfig::stepwise_layers):
// no k/v for a shared-KV layer; where V is normed without a weight (v_norm)
// attn_v may be absent (K is then V).
void load_shaped_attention(Loader& L, const ModelConfig& c, int32_t i, const std::string& p, LayerWeights& l) {
  const int64_t hd = c.head_dim_of(i), q = c.q_dim_of(i), kv = c.kv_dim_of(i);
  l.wq = L.matrix(p + "attn_q.weight", c.n_embd, q);
  if (c.qk_norm) l.q_norm = L.vector_f32(p + "attn_q_norm.weight", hd);
  if (!c.shares_kv(i)) {
    l.wk = L.matrix(p + "attn_k.weight", c.n_embd, kv);
    if (!c.v_norm || L.f.find_tensor(p + "attn_v.weight")) l.wv = L.matrix(p + "attn_v.weight", c.n_embd, kv);
    if (c.qk_norm) l.k_norm = L.vector_f32(p + "attn_k_norm.weight", hd);
    if (c.v_norm) l.v_norm = L.f32_on_backend(std::vector<float>(size_t(hd), 1.0f), p + "v_norm (ones)");
  }
  l.wo = L.matrix(p + "attn_output.weight", q, c.n_embd);
}

// Gemma 4's extras of layer i: the MoE branch's norms, router gain and
// expert scales; per-layer embedding weights; the output scale.
void load_gemma4_extras(Loader& L, const ModelConfig& c, int32_t i, const std::string& p, LayerWeights& l) {
  if (c.moe_with_dense) {
    std::vector<float> g = L.host_f32(p + "ffn_gate_inp.scale", c.n_embd);
    for (float& x : g) x /= std::sqrt(float(c.n_embd));
    l.router_norm = L.f32_on_backend(g, p + "ffn_gate_inp.scale");
    l.expert_scale = L.vector_f32(p + "ffn_down_exps.scale", c.n_expert);
    l.pre_ffn_norm_2 = L.vector_f32(p + "pre_ffw_norm_2.weight", c.n_embd);
    l.post_ffn_norm_1 = L.vector_f32(p + "post_ffw_norm_1.weight", c.n_embd);
    l.post_ffn_norm_2 = L.vector_f32(p + "post_ffw_norm_2.weight", c.n_embd);
  }
  if (c.n_embd_per_layer > 0) {
    const int64_t npl = c.n_embd_per_layer;
    l.ple_gate = L.matrix(p + "inp_gate.weight", c.n_embd, npl);
    l.ple_proj = L.matrix(p + "proj.weight", npl, c.n_embd);
    l.ple_post_norm = L.vector_f32(p + "post_norm.weight", c.n_embd);
    l.ple_embd = L.column_part("per_layer_token_embd.weight", {uint64_t(npl * c.n_layer), uint64_t(c.n_vocab)},
                               i * npl, npl);
  }
  if (c.layer_out_scale && L.f.find_tensor(p + "layer_output_scale.weight")) {
    l.out_scale = L.host_f32(p + "layer_output_scale.weight", 1)[0];
    RF_CHECK(std::isfinite(l.out_scale), "tensor '", p, "layer_output_scale.weight' is not finite");
  }
}

// An MTP block's own tensors (llama.cpp's names: blk.N.nextn.*).
void load_mtp_extras(Loader& L, const ModelConfig& c, const std::string& p, MtpWeights& m) {
  m.eh_proj = L.matrix(p + "nextn.eh_proj.weight", 2 * int64_t(c.n_embd), c.n_embd);
  m.enorm = L.vector_f32(p + "nextn.enorm.weight", c.n_embd);
  m.hnorm = L.vector_f32(p + "nextn.hnorm.weight", c.n_embd);
  if (L.f.find_tensor(p + "nextn.embed_tokens.weight"))
    m.embed_tokens = L.matrix(p + "nextn.embed_tokens.weight", c.n_embd, c.n_vocab);
  if (L.f.find_tensor(p + "nextn.shared_head_head.weight"))
    m.shared_head_head = L.matrix(p + "nextn.shared_head_head.weight", c.n_embd, c.n_vocab);
  if (L.f.find_tensor(p + "nextn.shared_head_norm.weight"))
    m.shared_head_norm = L.vector_f32(p + "nextn.shared_head_norm.weight", c.n_embd);
}

// Elements [first, first + n) of an f32 vector, as a vector of their own.
Tensor f32_cols(const Tensor& v, int64_t first, int64_t n) {
  return make_tensor(static_cast<float*>(v.data) + first, DType::F32, n, 1, v.device);
}

// A range scaled by `unit` elements (heads -> rows of head_dim each).
IndexRange times(IndexRange r, int64_t unit) { return IndexRange{r.first * unit, r.count * unit}; }
IndexRange offset(IndexRange r, int64_t by) { return IndexRange{r.first + by, r.count}; }

}  // namespace

ModelWeights ModelWeights::load(const gguf::File& f, const ModelConfig& full, Backend& backend,
                                const std::function<void(uint64_t, uint64_t)>& progress, ShardSpec shard) {
  ModelWeights w;
  Loader L{f, backend, shard, w.host_parts, progress, 0, 0, 0, {}, {}};
  for (const auto& t : f.tensors()) L.total += t.n_bytes;
  // The rank's shapes, and what of each split dimension it holds (all of it
  // when not split: every range list below is then empty, the whole tensor).
  const ModelConfig c = shard_config(full, shard);
  const bool split = shard.split();
  const int64_t hd = c.head_dim;
  const IndexRange vocab = shard_range(c.n_vocab, shard);
  const IndexRange heads = times(shard_range(full.n_head, shard), hd);
  const IndexRange kv_heads = times(kv_head_range(full.n_head_kv, shard), hd);
  const IndexRange ff = shard_range(full.n_ff, shard), ff_exp = shard_range(full.n_ff_expert, shard);
  auto only = [&](std::vector<IndexRange> r) { return split ? r : std::vector<IndexRange>{}; };

  w.tok_embd = L.matrix("token_embd.weight", c.n_embd, c.n_vocab, only({vocab}));
  w.output_norm = L.vector_f32("output_norm.weight", c.n_embd);
  if (f.find_tensor("output.weight")) {
    w.output = L.matrix("output.weight", c.n_embd, c.n_vocab, only({vocab}));
  } else {
    w.output = w.tok_embd;
    w.tied_output = true;
  }
  if (f.find_tensor("rope_freqs.weight")) w.rope_freqs = L.vector_f32("rope_freqs.weight", c.rope.n_rot / 2);
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight", "blk.0.rope_factors_long.weight"})
    RF_CHECK(!f.find_tensor(name), "model has '", name, "': LongRoPE scaling (", c.arch,
             " long-context variants) is not supported yet");
  if (c.n_embd_per_layer > 0) {
    const int64_t npl = int64_t(c.n_embd_per_layer) * c.n_layer;
    w.ple_model_proj = L.matrix("per_layer_model_proj.weight", c.n_embd, npl);
    w.ple_proj_norm = L.vector_f32("per_layer_proj_norm.weight", c.n_embd_per_layer);
  }
  const int64_t q_full = full.q_dim(), kv_full = full.kv_dim();
  // q, k and v rows (or biases) of a rank, in that order, in one tensor
  // holding all of q's, then k's, then v's.
  const std::vector<IndexRange> qkv_parts =
      only({heads, offset(kv_heads, q_full), offset(kv_heads, q_full + kv_full)});
  // Block i (a main layer, or an MTP block after them) into l.
  auto load_layer = [&](int32_t i, LayerWeights& l) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool attention = !(i < c.n_layer && c.is_recurrent(i));
    l.attn_norm = L.vector_f32(p + "attn_norm.weight", c.n_embd);
    if (!attention) {
      load_recurrent_mixer(L, c, p, l);
    } else if (c.stepwise_layers()) {
      load_shaped_attention(L, c, i, p, l);
    } else if (c.attn_output_gate) {
      load_gated_attention(L, c, p, l, backend.packs_qkv());
    } else if (f.find_tensor(p + "attn_qkv.weight")) {
      // One matrix of q, k and v rows, in that order (a rank's parts copied together).
      const Tensor qkv = L.matrix(p + "attn_qkv.weight", c.n_embd, q_full + 2 * kv_full, qkv_parts);
      l.wq = qkv.slice_rows(0, c.q_dim());
      l.wk = qkv.slice_rows(c.q_dim(), c.kv_dim());
      l.wv = qkv.slice_rows(c.q_dim() + c.kv_dim(), c.kv_dim());
      l.fused_qkv = true;
      if (c.qkv_bias == BiasUse::Required ||
          (c.qkv_bias == BiasUse::Optional && f.find_tensor(p + "attn_qkv.bias"))) {
        const Tensor b = L.vector_f32(p + "attn_qkv.bias", q_full + 2 * kv_full, qkv_parts);
        l.bq = f32_cols(b, 0, c.q_dim());
        l.bk = f32_cols(b, c.q_dim(), c.kv_dim());
        l.bv = f32_cols(b, c.q_dim() + c.kv_dim(), c.kv_dim());
      }
    } else if (const Tensor qkv = backend.packs_qkv()
                                      ? L.packed({{p + "attn_q.weight", q_full, only({heads})},
                                                  {p + "attn_k.weight", kv_full, only({kv_heads})},
                                                  {p + "attn_v.weight", kv_full, only({kv_heads})}},
                                                 c.n_embd, p + "attn_qkv (packed)")
                                      : Tensor{};
               qkv.data) {
      l.wq = qkv.slice_rows(0, c.q_dim());
      l.wk = qkv.slice_rows(c.q_dim(), c.kv_dim());
      l.wv = qkv.slice_rows(c.q_dim() + c.kv_dim(), c.kv_dim());
    } else {
      l.wq = L.matrix(p + "attn_q.weight", c.n_embd, q_full, only({heads}));
      l.wk = L.matrix(p + "attn_k.weight", c.n_embd, kv_full, only({kv_heads}));
      l.wv = L.matrix(p + "attn_v.weight", c.n_embd, kv_full, only({kv_heads}));
    }
    const bool bias = attention && !l.fused_qkv && (c.qkv_bias == BiasUse::Required ||
                                       (c.qkv_bias == BiasUse::Optional && f.find_tensor(p + "attn_q.bias")));
    if (bias) {
      l.bq = L.vector_f32(p + "attn_q.bias", q_full, only({heads}));
      l.bk = L.vector_f32(p + "attn_k.bias", kv_full, only({kv_heads}));
      l.bv = L.vector_f32(p + "attn_v.bias", kv_full, only({kv_heads}));
    }
    if (c.qk_norm && attention && !c.stepwise_layers()) {
      l.q_norm = L.vector_f32(p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = L.vector_f32(p + "attn_k_norm.weight", c.head_dim);
    }
    if (attention && !c.stepwise_layers()) l.wo = L.columns(p + "attn_output.weight", {uint64_t(q_full), uint64_t(c.n_embd)}, heads);
    if (c.out_bias) {
      RF_CHECK(!split, "tensor parallelism of '", c.arch, "' (its output bias) is not supported yet");
      l.bo = L.vector_f32(p + "attn_output.bias", c.n_embd);
    }
    if (c.attn_sinks) l.sinks = L.vector_f32(p + "attn_sinks.weight", full.n_head, only({shard_range(full.n_head, shard)}));
    if (c.post_attn_norm) l.post_attn_norm = L.vector_f32(p + "post_attention_norm.weight", c.n_embd);
    l.ffn_norm = L.vector_f32(p + c.ffn_norm_name + ".weight", c.n_embd);
    if (c.has_experts()) {
      l.router = L.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
      // ffn_{gate,up}_exps [n_embd, n_ff_expert, n_expert]: each expert's
      // rows of the rank; ffn_down_exps [n_ff_expert, n_embd, n_expert]: its columns.
      const auto n_embd = uint64_t(c.n_embd), n_ff = uint64_t(full.n_ff_expert), n_exp = uint64_t(c.n_expert);
      std::vector<IndexRange> per_expert;
      for (int64_t e = 0; e < c.n_expert; ++e) per_expert.push_back(offset(ff_exp, e * int64_t(n_ff)));
      l.experts.n_expert = c.n_expert;
      if (f.find_tensor(p + "ffn_gate_up_exps.weight")) {  // per expert n_ff gate rows, then n_ff up rows
        RF_CHECK(!split, "tensor parallelism of fused ffn_gate_up_exps is not supported yet");
        std::vector<IndexRange> gate_rows, up_rows;
        for (int64_t e = 0; e < c.n_expert; ++e) {
          gate_rows.push_back({2 * e * int64_t(n_ff), int64_t(n_ff)});
          up_rows.push_back({(2 * e + 1) * int64_t(n_ff), int64_t(n_ff)});
        }
        const std::string n = p + "ffn_gate_up_exps.weight";
        l.experts.gate = L.rows(n, {n_embd, 2 * n_ff, n_exp}, gate_rows);
        l.experts.up = L.rows(n, {n_embd, 2 * n_ff, n_exp}, up_rows);
      } else {
        l.experts.gate = L.rows(p + "ffn_gate_exps.weight", {n_embd, n_ff, n_exp}, only(per_expert));
        l.experts.up = L.rows(p + "ffn_up_exps.weight", {n_embd, n_ff, n_exp}, only(per_expert));
      }
      l.experts.down = L.columns(p + "ffn_down_exps.weight", {n_ff, n_embd, n_exp}, ff_exp);
      if (c.moe_biases) {
        RF_CHECK(!split, "tensor parallelism of '", c.arch, "' (its expert biases) is not supported yet");
        l.router_bias = L.vector_f32(p + "ffn_gate_inp.bias", c.n_expert);
        l.experts.gate_bias = L.matrix_f32(p + "ffn_gate_exps.bias", int64_t(n_ff), c.n_expert);
        l.experts.up_bias = L.matrix_f32(p + "ffn_up_exps.bias", int64_t(n_ff), c.n_expert);
        l.experts.down_bias = L.matrix_f32(p + "ffn_down_exps.bias", c.n_embd, c.n_expert);
      }
    }
    if (!c.has_experts() || c.moe_with_dense) {
      const int64_t n_ff_full = full.n_ff_of(i), n_ff_l = c.n_ff_of(i);
      if (c.fused_gate_up) {
        // ffn_up holds the gate rows, then the up rows.
        const Tensor gate_up =
            L.matrix(p + "ffn_up.weight", c.n_embd, 2 * int64_t(n_ff_full), only({ff, offset(ff, n_ff_full)}));
        l.w_gate = gate_up.slice_rows(0, n_ff_l);
        l.w_up = gate_up.slice_rows(n_ff_l, n_ff_l);
      } else if (const Tensor gate_up = backend.packs_qkv()
                                            ? L.packed({{p + "ffn_gate.weight", n_ff_full, only({ff})},
                                                        {p + "ffn_up.weight", n_ff_full, only({ff})}},
                                                       c.n_embd, p + "ffn_gate_up (packed)")
                                            : Tensor{};
                 gate_up.data) {
        l.w_gate = gate_up.slice_rows(0, n_ff_l);
        l.w_up = gate_up.slice_rows(n_ff_l, n_ff_l);
      } else {
        l.w_gate = L.matrix(p + "ffn_gate.weight", c.n_embd, n_ff_full, only({ff}));
        l.w_up = L.matrix(p + "ffn_up.weight", c.n_embd, n_ff_full, only({ff}));
      }
      l.w_down = L.columns(p + "ffn_down.weight", {uint64_t(n_ff_full), uint64_t(c.n_embd)}, ff);
    }
    if (c.n_ff_shexp > 0) load_shared_expert(L, c, p, l);
    if (c.post_ffn_norm) l.post_ffn_norm = L.vector_f32(p + "post_ffw_norm.weight", c.n_embd);
    if (c.stepwise_layers() && i < c.n_layer) load_gemma4_extras(L, c, i, p, l);
  };
  w.layers.resize(size_t(c.n_layer));
  for (int32_t i = 0; i < c.n_layer; ++i) load_layer(i, w.layers[size_t(i)]);
  w.mtp.resize(size_t(c.n_layer_nextn));
  for (int32_t j = 0; j < c.n_layer_nextn; ++j) {
    load_layer(c.n_layer + j, w.mtp[size_t(j)].layer);
    load_mtp_extras(L, c, "blk." + std::to_string(c.n_layer + j) + ".", w.mtp[size_t(j)]);
  }
  // As llama.cpp: a tensor the architecture does not use means the file is
  // not what its metadata says (computing without it would be wrong).
  for (const auto& t : f.tensors())
    RF_CHECK(L.used.count(t.name), "model has tensor '", t.name, "' that architecture '", c.arch,
             "' does not use");
  w.bytes = L.loaded;
  // Each pre-norm's gain into the matmuls of its output, where the backend
  // takes it (Backend::fold_norm_gain; a tensor-parallel rank's norms feed
  // all-reduce fusions that keep their gains).
  if (!split && !c.stepwise_layers()) {
    for (LayerWeights& l : w.layers) {
      const std::vector<Tensor> inputs = l.mixer_inputs();
      const Tensor gate_up[2] = {l.w_gate, l.w_up};
      backend.fold_norm_gain(l.attn_norm, inputs);
      if (l.experts.n_expert == 0) backend.fold_norm_gain(l.ffn_norm, gate_up);
    }
  }
  for (const LayerWeights& l : w.layers)
    if (l.experts.n_expert > 0) w.expert_bytes += l.experts.gate.bytes() + l.experts.up.bytes() + l.experts.down.bytes();
  // Backends that copied the weights over no longer need the host parts.
  if (backend.device() != DeviceKind::CPU) w.host_parts.clear();
  return w;
}

std::vector<Tensor> LayerWeights::mixer_inputs() const {
  if (ssm_in.data) return {ssm_in, ssm_z, ssm_beta, ssm_alpha};
  if (w_attn_gate.data) return {wq, wk, wv, w_attn_gate};
  if (!wk.data) return {wq};      // a shared-KV layer
  if (!wv.data) return {wq, wk};  // K is V
  return {wq, wk, wv};
}

double ModelWeights::bytes_read_per_step(int32_t seqs, int32_t n_used, int32_t n_expert) const {
  if (expert_bytes == 0 || n_expert <= 0) return double(bytes);
  const double chosen = 1.0 - std::pow(1.0 - double(n_used) / n_expert, std::max(seqs, 1));
  return double(bytes - expert_bytes) + chosen * double(expert_bytes);
}

}  // namespace rf
