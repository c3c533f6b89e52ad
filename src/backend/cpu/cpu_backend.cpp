// CpuBackend: memory, step upload and the elementwise ops. Matmul, attention
// (with RoPE/KV store), mixture of experts, the recurrent (Gated DeltaNet)
// ops and sampling live in their own files.
#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "backend/cpu/cpu_qdot.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/log.h"
#include "core/quant.h"

namespace rf {

float gelu_tanh_f16(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const double xh = f16_to_f32(f32_to_f16(x));
  const double k = 0.79788456080286535587989211986876;  // sqrt(2/pi)
  const double y = 0.5 * xh * (1.0 + std::tanh(k * (xh + 0.044715 * xh * xh * xh)));
  return f16_to_f32(f32_to_f16(float(y)));
}

CpuBackend::CpuBackend(size_t n_threads, CpuMatmul matmul)
    : pool_(n_threads), matmul_mode_(matmul), kernels_(cpu::kernels_for(matmul)) {}

CpuBackend::~CpuBackend() {
  for (void* p : allocations_) std::free(p);
  for (void* p : weight_chunks_) std::free(p);
}

std::string CpuBackend::name() const {
  return str("cpu (", pool_.size(), " threads, ", cpu::isa_name(cpu::best_kernels().isa), " kernels, ",
             matmul_mode_ == CpuMatmul::Fast ? "8-bit activations" : "reference matmul", ")");
}

void* CpuBackend::alloc(size_t bytes, const std::string& what) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  RF_CHECK(p, "cpu: cannot allocate ", bytes, " bytes for ", what);
  std::lock_guard<std::mutex> lock(alloc_mu_);
  allocations_.insert(p);
  return p;
}

void CpuBackend::free(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(alloc_mu_);
  if (allocations_.erase(p)) std::free(p);
}

void CpuBackend::copy_to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

size_t CpuBackend::available_memory() {
  // MemAvailable (free memory and reclaimable caches), else free pages.
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    in.ignore(64, '\n');
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

size_t CpuBackend::free_memory() const {
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

Tensor CpuBackend::load_weight(const Tensor& host, const std::string& name) {
  // Chunks of at least kChunk bytes, 2 MiB-aligned and marked for huge
  // pages; a weight that does not fit the current chunk's rest starts a new
  // one (the rest is never touched, so never resident).
  // Copies stop at 90% of the memory available at the first weight (the
  // file's page cache counts as available): weights past it are read in
  // place from the mapping, as a model larger than the memory must be.
  constexpr size_t kHuge = size_t(2) << 20, kChunk = size_t(256) << 20;
  const size_t bytes = host.bytes(), need = (bytes + 63) / 64 * 64;
  std::lock_guard<std::mutex> lock(alloc_mu_);
  if (weight_budget_ == 0) weight_budget_ = std::max<size_t>(available_memory() / 10 * 9, 1);
  if (weight_next_ == nullptr || size_t(weight_end_ - weight_next_) < need) {
    const size_t size = std::max(kChunk, (need + kHuge - 1) / kHuge * kHuge);
    if (weight_copied_ + size > weight_budget_) {
      if (!weights_in_place_)
        log_info("cpu: weights past ", weight_copied_ >> 20, " MiB are read in place from the model file (",
                 weight_budget_ >> 20, " MiB of memory available for copies)");
      weights_in_place_ = true;
      return host;
    }
    weight_copied_ += size;
    void* chunk = std::aligned_alloc(kHuge, size);
    RF_CHECK(chunk, "cpu: cannot allocate ", size, " bytes for weights (", name, ")");
    (void)madvise(chunk, size, MADV_HUGEPAGE);  // (a hint: without it, 4 KiB pages)
    weight_chunks_.push_back(chunk);
    weight_next_ = static_cast<uint8_t*>(chunk);
    weight_end_ = weight_next_ + size;
  }
  Tensor t = host;
  t.data = weight_next_;
  weight_next_ += need;
  std::memcpy(t.data, host.data, bytes);
  return t;
}

Tensor CpuBackend::load_f32(const float* host, int64_t cols, int64_t rows, const std::string& name) {
  auto* p = static_cast<float*>(alloc(size_t(cols * rows) * 4, name));
  std::memcpy(p, host, size_t(cols * rows) * 4);
  return make_tensor(p, DType::F32, cols, rows);
}

void CpuBackend::reserve(const BackendLimits& limits) {
  moe_.reserve(limits);
  // Activation rows up to the widest of the model's dims, at most 5/4 bytes
  // an element (Q8_32); wider inputs grow it on first use.
  const int64_t widest = std::max({int64_t(limits.n_embd), int64_t(limits.n_ff), int64_t(limits.n_heads) * limits.head_dim});
  mm_.reserve(size_t(std::max(0, limits.max_tokens)) * size_t(std::max<int64_t>(widest, 0)) * 5 / 4);
}

StepMeta CpuBackend::upload_step(const Batch& b) {
  step_ = b;
  step_slots_.clear();
  step_tables_.clear();
  for (const Batch::Group& g : step_.groups) {
    RF_CHECK(int32_t(g.slot_mapping.size()) == b.n_tokens() &&
                 g.block_tables.size() == size_t(b.n_seqs()) * size_t(b.max_blocks_per_seq),
             "cpu upload_step: KV group arrays of the wrong size");
    step_slots_.insert(step_slots_.end(), g.slot_mapping.begin(), g.slot_mapping.end());
    step_tables_.insert(step_tables_.end(), g.block_tables.begin(), g.block_tables.end());
  }
  StepMeta m;
  m.token_ids = step_.token_ids.data();
  m.positions = step_.positions.data();
  m.slot_mapping = step_slots_.data();
  m.token_seq = step_.token_seq.data();
  m.seq_starts = step_.seq_starts.data();
  m.context_lens = step_.context_lens.data();
  m.block_tables = step_tables_.data();
  m.n_groups = b.n_groups();
  m.group_slot_stride = b.n_tokens();
  m.group_table_stride = int64_t(b.n_seqs()) * b.max_blocks_per_seq;
  m.logits_rows = step_.logits_rows.data();
  m.state_slots = step_.state_slots.empty() ? nullptr : step_.state_slots.data();
  m.n_tokens = step_.n_tokens();
  m.n_seqs = step_.n_seqs();
  m.n_logits = step_.n_logits();
  m.max_blocks_per_seq = step_.max_blocks_per_seq;
  m.block_size = step_.block_size;
  m.max_new_tokens = step_.max_new_tokens();
  m.max_context_len = step_.max_context_len();
  return m;
}

void CpuBackend::embed(const Tensor& table, const StepMeta& m, Tensor& out) {
  RF_CHECK(out.type == DType::F32 && out.cols() == table.cols() && out.rows() >= m.n_tokens, "cpu embed: bad shapes");
  const int64_t vocab = table.rows();
  for (int32_t t = 0; t < m.n_tokens; ++t) {
    const int32_t id = m.token_ids[t];
    RF_CHECK(id >= 0 && id < vocab, "token id ", id, " out of range (vocab ", vocab, ")");
    dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + size_t(id) * table.row_bytes(),
                   out.ptr<float>() + t * out.cols(), size_t(table.cols()));
  }
}

void CpuBackend::embed_range(const Tensor& table, int64_t first, const StepMeta& m, Tensor& out) {
  RF_CHECK(out.type == DType::F32 && out.cols() == table.cols() && out.rows() >= m.n_tokens,
           "cpu embed_range: bad shapes");
  for (int32_t t = 0; t < m.n_tokens; ++t) {
    const int64_t row = int64_t(m.token_ids[t]) - first;
    float* o = out.ptr<float>() + t * out.cols();
    if (row < 0 || row >= table.rows()) std::fill(o, o + out.cols(), 0.0f);
    else dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + size_t(row) * table.row_bytes(), o,
                        size_t(table.cols()));
  }
}

double CpuBackend::measure_copy_bandwidth() {
  const size_t bytes = size_t(256) << 20;
  std::vector<uint8_t> a(bytes, 1), b(bytes, 2);
  const size_t slice = (bytes / pool_.size() + 63) / 64 * 64;
  auto copy = [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const size_t off = std::min(bytes, t * slice), len = std::min(bytes - off, slice);
      std::memcpy(b.data() + off, a.data() + off, len);
    }
  };
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool_.parallel_for(pool_.size(), 1, copy);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, 2.0 * double(bytes) / s);
  }
  return best;
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  RF_CHECK(x.type == DType::F32 && w.type == DType::F32 && out.type == DType::F32 && w.cols() == x.cols(),
           "cpu rms_norm: bad shapes");
  const int64_t n = x.cols();
  pool_.parallel_for(size_t(x.rows()), 16, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const float* xr = x.ptr<float>() + r * n;
      float* o = out.ptr<float>() + r * n;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
      const float scale = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
      for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * scale * w.ptr<float>()[i];
    }
  });
}

Handoff CpuBackend::matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in) {
  check_handoff(x, x_in, "matmul");
  cpu::matmul(pool_, x, w, out, mm_, kernels_);
  return {};
}

Handoff CpuBackend::matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                                 std::span<const Tensor> biases, const Handoff& x_in) {
  RF_CHECK(ws.size() == outs.size(), "matmul_multi: ", ws.size(), " weights for ", outs.size(), " outputs");
  RF_CHECK(biases.empty() || biases.size() == ws.size(), "matmul_multi: ", biases.size(), " biases for ", ws.size(),
           " weights");
  check_handoff(x, x_in, "matmul_multi");
  for (size_t i = 0; i < ws.size(); i += cpu::kMaxMultiWeights) {
    const size_t c = std::min(cpu::kMaxMultiWeights, ws.size() - i);
    cpu::matmul_multi(pool_, x, ws.subspan(i, c), outs.subspan(i, c), mm_, kernels_);
  }
  for (size_t i = 0; i < biases.size(); ++i)
    if (biases[i].data) add_bias(outs[i], biases[i]);
  return {};
}

void CpuBackend::matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate,
                                    Tensor& up, Tensor& out, Activation act, const Handoff& x_in) {
  check_handoff(x, x_in, "matmul_gate_up_glu");
  const Tensor ws[2] = {w_gate, w_up};
  Tensor outs[2] = {gate, up};
  cpu::matmul_multi(pool_, x, ws, outs, mm_, kernels_);
  if (act == Activation::GeluTanh) geglu(gate, up, out);
  else if (act == Activation::SiLUClampedOai) swiglu_oai(gate, up, out);
  else swiglu(gate, up, out);
}

void CpuBackend::rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                               const KVLayer& cache) {
  cpu::rope_store_kv(pool_, q, k, v, m, rope, cache);
}

void CpuBackend::rope_q(Tensor& q, int32_t head_dim, const StepMeta& m, const RopeParams& rope) {
  cpu::rope_q(pool_, q, head_dim, m, rope);
}

void CpuBackend::moe_scale_weights(const Tensor& ids, const Tensor& scales, Tensor& weights) {
  RF_CHECK(ids.type == DType::I32 && weights.type == DType::F32 && scales.type == DType::F32 &&
               ids.cols() == weights.cols() && weights.rows() >= ids.rows(),
           "cpu moe_scale_weights: bad shapes");
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t e = ids.ptr<int32_t>()[i];
    RF_CHECK(e >= 0 && e < scales.numel(), "moe_scale_weights: expert id ", e, " out of range");
    weights.ptr<float>()[i] *= scales.ptr<float>()[e];
  }
}

void CpuBackend::mla_rope_store_kv(Tensor& q, Tensor& kv, const Tensor& kv_norm, float eps, const StepMeta& m,
                                   const RopeParams& rope, const MlaParams& p, const KVLayer& cache) {
  cpu::mla_rope_store_kv(pool_, q, kv, kv_norm, eps, m, rope, p, cache);
}

void CpuBackend::attention_mla(const Tensor& q, const KVLayer& cache, const StepMeta& m, const MlaParams& p, Tensor&,
                               Tensor&, Tensor& out) {
  cpu::attention_mla(pool_, q, cache, m, p, out);
}

Handoff CpuBackend::attention(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                              Tensor& out) {
  RF_CHECK(p.window == 0 && p.softcap == 0.0f && !p.sinks,
           "attention: a sliding window, soft-cap or sinks need attention_ext");
  cpu::attention(pool_, q, cache, m, p, out);
  return {};
}

Handoff CpuBackend::attention_ext(const Tensor& q, const KVLayer& cache, const StepMeta& m,
                                  const AttentionParams& p, Tensor& out) {
  RF_CHECK(p.window >= 0 && p.softcap >= 0.0f, "attention_ext: negative window or soft-cap");
  cpu::attention(pool_, q, cache, m, p, out);
  return {};
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.numel() == up.numel() && out.numel() >= gate.numel(), "cpu swiglu: bad shapes");
  const float* g = gate.ptr<float>();
  const float* u = up.ptr<float>();
  float* o = out.ptr<float>();
  pool_.parallel_for(size_t(gate.numel()), 4096, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  RF_CHECK(a.numel() == b.numel() && out.numel() >= a.numel(), "cpu add: bad shapes");
  const float* pa = a.ptr<float>();
  const float* pb = b.ptr<float>();
  float* o = out.ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) o[i] = pa[i] + pb[i];
}

void CpuBackend::add_bias(Tensor& x, const Tensor& bias) {
  RF_CHECK(x.type == DType::F32 && bias.type == DType::F32 && bias.numel() == x.cols(), "cpu add_bias: bad shapes");
  const int64_t n = x.cols();
  const float* b = bias.ptr<float>();
  for (int64_t r = 0; r < x.rows(); ++r) {
    float* xr = x.ptr<float>() + r * n;
    for (int64_t i = 0; i < n; ++i) xr[i] += b[i];
  }
}

void CpuBackend::geglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.type == DType::F32 && up.type == DType::F32 && out.type == DType::F32, "cpu geglu: f32 only");
  RF_CHECK(gate.numel() == up.numel() && out.numel() >= gate.numel(), "cpu geglu: bad shapes");
  const float* g = gate.ptr<float>();
  const float* u = up.ptr<float>();
  float* o = out.ptr<float>();
  pool_.parallel_for(size_t(gate.numel()), 4096, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) o[i] = gelu_tanh_f16(g[i]) * u[i];
  });
}

void CpuBackend::swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.type == DType::F32 && up.type == DType::F32 && out.type == DType::F32, "cpu swiglu_oai: f32 only");
  RF_CHECK(gate.numel() == up.numel() && out.numel() >= gate.numel(), "cpu swiglu_oai: bad shapes");
  const float* g = gate.ptr<float>();
  const float* u = up.ptr<float>();
  float* o = out.ptr<float>();
  pool_.parallel_for(size_t(gate.numel()), 4096, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) o[i] = glu_oai(g[i], u[i]);
  });
}

void CpuBackend::scale(Tensor& x, float s) {
  RF_CHECK(x.type == DType::F32, "cpu scale: f32 only");
  float* p = x.ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] *= s;
}

void CpuBackend::convert(const Tensor& x, Tensor& out) {
  RF_CHECK(x.type == DType::F32 && out.type == DType::F32 && out.numel() == x.numel(),
           "cpu convert: f32 to f32 (the CPU's activations) of one size");
  if (out.data != x.data) std::memmove(out.data, x.data, x.bytes());
}

void CpuBackend::softcap(Tensor& x, float cap) {
  RF_CHECK(x.type == DType::F32 && cap > 0.0f, "cpu softcap: f32 and a positive cap");
  float* p = x.ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = float(double(cap) * std::tanh(double(p[i]) / double(cap)));
}

Handoff CpuBackend::moe_route(const Tensor& router_logits, const MoeParams& p, Tensor& ids, Tensor& weights) {
  cpu::moe_route(router_logits, p, ids, weights);
  return {};
}

void CpuBackend::moe_ffn(const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w,
                         const MoeParams& p, Tensor& out, const Handoff& x_in, const Handoff& ids_in) {
  check_handoff(x, x_in, "moe_ffn");
  check_handoff(ids, ids_in, "moe_ffn");
  cpu::moe_ffn(pool_, x, ids, weights, w, p, out, moe_, kernels_);
}

void CpuBackend::gather_rows(const Tensor& x, const StepMeta& m, Tensor& out) {
  RF_CHECK(out.type == x.type && out.cols() == x.cols() && out.rows() >= m.n_logits, "cpu gather_rows: bad shapes");
  const size_t bytes = row_bytes(x.type, uint64_t(x.cols()));
  const auto* src = static_cast<const unsigned char*>(x.data);
  auto* dst = static_cast<unsigned char*>(out.data);
  for (int32_t i = 0; i < m.n_logits; ++i) std::memcpy(dst + size_t(i) * bytes, src + size_t(m.logits_rows[i]) * bytes, bytes);
}

void CpuBackend::sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                        std::vector<SampleResult>& out) {
  RF_CHECK(logits.type == DType::F32 && logits.rows() >= int64_t(rows.size()), "cpu sample: bad shapes");
  out.resize(rows.size());
  const int32_t vocab = int32_t(logits.cols());
  pool_.parallel_for(rows.size(), 1, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const SampleRow& row = rows[r];
      RF_CHECK(row.penalty_offset >= 0 && size_t(row.penalty_offset + row.penalty_count) <= penalties.size(),
               "cpu sample: penalty range out of bounds");
      cpu::sample_row(logits.ptr<float>() + r * size_t(vocab), vocab, row, penalties.data() + row.penalty_offset,
                      out[r]);
    }
  });
}

}  // namespace rf
