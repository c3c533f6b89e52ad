// Looking up, validating and loading model tensors.
#include "model/weights.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "model/synthetic.h"
#include "model/weight_loader.h"

namespace rf {
namespace {

using namespace weights_detail;

// Elements [first, first + n) of an f32 vector, as a vector of their own.
Tensor f32_cols(const Tensor& v, int64_t first, int64_t n) {
  return make_tensor(static_cast<float*>(v.data) + first, DType::F32, n, 1, v.device);
}

// A range scaled by `unit` elements (heads -> rows of head_dim each).
IndexRange times(IndexRange r, int64_t unit) { return IndexRange{r.first * unit, r.count * unit}; }
IndexRange offset(IndexRange r, int64_t by) { return IndexRange{r.first + by, r.count}; }

}  // namespace

ModelWeights ModelWeights::load(const gguf::File& f, const ModelConfig& full, Backend& backend,
                                const std::function<void(uint64_t, uint64_t)>& progress, ShardSpec shard,
                                WeightPlacement placement) {
  ModelWeights w;
  Loader L{f, backend, shard, w.host_parts, progress, 0, 0, 0, {}, {}};
  for (const auto& t : f.tensors()) L.total += t.n_bytes;
  // The host-resident experts' loader: onto a CPU backend of one thread,
  // whose weights are its copies of the mapped file's tensors (huge pages)
  // and whose other tensors are its own host allocations.
  const int32_t host_layers =
      backend.device() == DeviceKind::CPU ? 0 : std::clamp(placement.host_expert_layers, 0, full.n_layer);
  std::unique_ptr<Loader> H;
  if (host_layers > 0 && full.has_experts()) {
    RF_CHECK(!shard.split(), "experts in host memory (--cpu-moe, --n-cpu-moe) with tensor parallelism are not "
                             "supported yet");
    w.host_store = std::make_shared<CpuBackend>(1);
    H = std::make_unique<Loader>(Loader{f, *w.host_store, shard, w.host_expert_parts, progress, 0, L.total, 0, {}, {}});
  }
  // Layer i's experts' loader (its progress continues L's).
  auto expert_loader = [&](int32_t i) -> Loader& {
    if (!H || i >= host_layers) return L;
    H->done = L.done;
    return *H;
  };
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
    } else if (c.is_mla()) {
      RF_CHECK(!split, "tensor parallelism of '", c.arch, "' (multi-head latent attention) is not supported yet");
      load_mla_attention(L, c, p, l);
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
    if (attention && !c.stepwise_layers() && !c.is_mla()) l.wo = L.columns(p + "attn_output.weight", {uint64_t(q_full), uint64_t(c.n_embd)}, heads);
    if (c.out_bias) {
      RF_CHECK(!split, "tensor parallelism of '", c.arch, "' (its output bias) is not supported yet");
      l.bo = L.vector_f32(p + "attn_output.bias", c.n_embd);
    }
    if (c.attn_sinks) l.sinks = L.vector_f32(p + "attn_sinks.weight", full.n_head, only({shard_range(full.n_head, shard)}));
    if (c.post_attn_norm) l.post_attn_norm = L.vector_f32(p + "post_attention_norm.weight", c.n_embd);
    l.ffn_norm = L.vector_f32(p + c.ffn_norm_name + ".weight", c.n_embd);
    const bool moe = c.is_moe_layer(i);
    if (moe) {
      l.router = L.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
      if (c.expert_choice_bias) l.choice_bias = L.vector_f32(p + "exp_probs_b.bias", c.n_expert);
      // ffn_{gate,up}_exps [n_embd, n_ff_expert, n_expert]: each expert's
      // rows of the rank; ffn_down_exps [n_ff_expert, n_embd, n_expert]: its columns.
      const auto n_embd = uint64_t(c.n_embd), n_ff = uint64_t(full.n_ff_expert), n_exp = uint64_t(c.n_expert);
      std::vector<IndexRange> per_expert;
      for (int64_t e = 0; e < c.n_expert; ++e) per_expert.push_back(offset(ff_exp, e * int64_t(n_ff)));
      l.experts.n_expert = c.n_expert;
      Loader& E = expert_loader(i);
      if (f.find_tensor(p + "ffn_gate_up_exps.weight")) {  // per expert n_ff gate rows, then n_ff up rows
        RF_CHECK(!split, "tensor parallelism of fused ffn_gate_up_exps is not supported yet");
        std::vector<IndexRange> gate_rows, up_rows;
        for (int64_t e = 0; e < c.n_expert; ++e) {
          gate_rows.push_back({2 * e * int64_t(n_ff), int64_t(n_ff)});
          up_rows.push_back({(2 * e + 1) * int64_t(n_ff), int64_t(n_ff)});
        }
        const std::string n = p + "ffn_gate_up_exps.weight";
        l.experts.gate = E.rows(n, {n_embd, 2 * n_ff, n_exp}, gate_rows);
        l.experts.up = E.rows(n, {n_embd, 2 * n_ff, n_exp}, up_rows);
      } else {
        l.experts.gate = E.rows(p + "ffn_gate_exps.weight", {n_embd, n_ff, n_exp}, only(per_expert));
        l.experts.up = E.rows(p + "ffn_up_exps.weight", {n_embd, n_ff, n_exp}, only(per_expert));
      }
      l.experts.down = E.columns(p + "ffn_down_exps.weight", {n_ff, n_embd, n_exp}, ff_exp);
      if (c.moe_biases) {
        RF_CHECK(!split, "tensor parallelism of '", c.arch, "' (its expert biases) is not supported yet");
        l.router_bias = L.vector_f32(p + "ffn_gate_inp.bias", c.n_expert);
        l.experts.gate_bias = E.matrix_f32(p + "ffn_gate_exps.bias", int64_t(n_ff), c.n_expert);
        l.experts.up_bias = E.matrix_f32(p + "ffn_up_exps.bias", int64_t(n_ff), c.n_expert);
        l.experts.down_bias = E.matrix_f32(p + "ffn_down_exps.bias", c.n_embd, c.n_expert);
      }
      if (&E != &L) {
        L.done = E.done;
        w.host_expert_bytes += E.loaded;
        E.loaded = 0;
        w.host_expert_layers = std::max(w.host_expert_layers, i + 1);
      }
    }
    if (!moe || c.moe_with_dense) {
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
    if (c.n_ff_shexp > 0 && moe) load_shared_expert(L, c, p, l);
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
  if (H) L.used.insert(H->used.begin(), H->used.end());
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
    if (l.experts.n_expert > 0 && l.experts.gate.device == backend.device())
      w.expert_bytes += l.experts.gate.bytes() + l.experts.up.bytes() + l.experts.down.bytes();
  // Backends that copied the weights over no longer need the host parts.
  if (backend.device() != DeviceKind::CPU) w.host_parts.clear();
  return w;
}

std::vector<Tensor> LayerWeights::mixer_inputs() const {
  if (ssm_in.data) return {ssm_in, ssm_z, ssm_beta, ssm_alpha};
  if (wkv_a.data) return {wq, wkv_a};  // MLA: the queries (or their LoRA) and c | the RoPE key
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

uint64_t ModelWeights::pin_host_experts(Backend& backend, const std::function<void(uint64_t, uint64_t)>& progress) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end), whole pages
  for (int32_t i = 0; i < host_expert_layers; ++i)
    for (const Tensor* t : layers[size_t(i)].experts.tensors())
      if (t->data) {
        const uintptr_t b = reinterpret_cast<uintptr_t>(t->data);
        ranges.push_back({b / page * page, (b + t->bytes() + page - 1) / page * page});
      }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uintptr_t, uintptr_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  uint64_t total = 0, done = 0;
  for (const auto& r : merged) total += r.second - r.first;
  for (const auto& r : merged) {
    auto pin = backend.pin_host_memory(reinterpret_cast<const void*>(r.first), r.second - r.first);
    if (!pin) break;
    host_pins.push_back(std::move(pin));
    done += r.second - r.first;
    if (progress) progress(done, total);
  }
  return done;
}

}  // namespace rf
