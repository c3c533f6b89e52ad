// CudaBackend: construction (options from the environment once, the
// device's one-time kernel setup), device memory, the per-step upload, op
// dispatch to the kernel launchers (kernels.h), sampling buffers and CUDA
// graphs. Per-op timing is op_profiler.h's, the copy-bandwidth probe
// bandwidth_probe.h's.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/bandwidth_probe.h"
#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/gpu.h"
#include "backend/cuda/moe_scratch.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_profiler.h"
#include "core/log.h"

namespace rf {

namespace gpu {
void throw_gpu_error(gpuError_t err, const char* what, const char* file, int line) {
  fail("GPU error '", gpuGetErrorString(err), "' in ", what, " at ", file, ":", line);
}
}  // namespace gpu

namespace {
gpuStream_t S(void* s) { return static_cast<gpuStream_t>(s); }
constexpr size_t kStagingBytes = size_t(64) << 20;
}  // namespace


namespace {
using OpTimer = gpu::OpProfiler::Scope;  // times one op when profiling
}  // namespace

gpu::LaunchCtx CudaBackend::ctx() const {
  // Each call numbers the launches it serves: a record of act_q8_state made
  // under number N is trusted under N and N + 1 (the producing op and the
  // one after it), never later.
  return {S(stream_), options_, warp_size_, act_q8_, &impl_->act_q8_state, ++impl_->op_seq, n_sms_};
}

void CudaBackend::forget_act_q8() {
  // Memory copied, allocated or freed, or a graph launched, outside any op:
  // whatever row act_q8's record names may have changed.
  impl_->act_q8_state.src = nullptr;
}

const char* CudaBackend::vendor() { return RF_GPU_VENDOR; }

int CudaBackend::device_count() {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return n;
}

CudaBackend::CudaBackend(const CudaOptions& options)
    : options_(CudaOptions::from_env(options)), impl_(std::make_unique<Impl>()) {
  RF_CHECK(device_count() > options.device, "no ", vendor(), " device ", options.device, " (", device_count(),
           " found)");
  RF_GPU_CHECK(gpuSetDevice(options.device));
  // One-time setup of this device for the kernels (shared-memory opt-ins),
  // before any launch. Idempotent: another backend on the device repeats it.
  gpu::gemv_device_setup();
  gpu::mma_device_setup();
  gpu::wgmma_device_setup();
  gpu::attention_device_setup();
  gpuDeviceProp prop;
  RF_GPU_CHECK(gpuGetDeviceProperties(&prop, options.device));
  name_ = str(vendor(), ":", options.device, " (", prop.name, ", ", prop.multiProcessorCount, " SMs, ",
              double(prop.totalGlobalMem) / (1 << 30), " GiB, warp ", prop.warpSize, ")");
  warp_size_ = prop.warpSize;
  gpuStream_t s;
  RF_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  stream_ = s;
  RF_GPU_CHECK(gpuEventCreate(&impl_->meta_copied));
  RF_GPU_CHECK(gpuHostAlloc(&impl_->staging, kStagingBytes, gpuHostAllocDefault));
  if (gpu::Blas::workspace_bytes() > 0) impl_->blas_workspace = alloc(gpu::Blas::workspace_bytes(), "BLAS workspace");
  if (options_.kq_stream_rows > 0 || options_.kq_stream_q6k_rows > 0)
    act_q8_ = alloc(gpu::act_q8_bytes(), "8-bit activations");
  n_sms_ = prop.multiProcessorCount;
  if (options_.profile) impl_->profiler = std::make_unique<gpu::OpProfiler>(s);
  impl_->blas = std::make_unique<gpu::Blas>(ctx(), impl_->blas_workspace, gpu::Blas::workspace_bytes());
}

CudaBackend::~CudaBackend() {
  (void)gpuSetDevice(options_.device);
  if (stream_) (void)gpuStreamSynchronize(S(stream_));
  impl_->profiler.reset();  // prints the op table
  clear_graphs();
  impl_->blas.reset();
  for (void* p : {static_cast<void*>(impl_->staging), static_cast<void*>(impl_->meta_host),
                  static_cast<void*>(impl_->rows_host), static_cast<void*>(impl_->pen_host),
                  static_cast<void*>(impl_->out_host), static_cast<void*>(impl_->mask_host)})
    if (p) (void)gpuFreeHost(p);
  impl_->meta_host = nullptr;
  for (auto& [p, n] : allocations_) (void)gpuFree(p);
  if (impl_->meta_copied) (void)gpuEventDestroy(impl_->meta_copied);
  if (stream_) (void)gpuStreamDestroy(S(stream_));
}

void* CudaBackend::alloc(size_t bytes, const std::string& what) {
  bind();  // memory and set-up calls bind the device themselves; ops rely on bind_thread()
  RF_CHECK(!capturing_, "cuda: allocation of ", what, " during graph capture");
  forget_act_q8();
  void* p = nullptr;
  // Whole 256-byte units (what the allocator hands out anyway), so that
  // vector reads past a buffer's last element stay inside it (NCCL's LL
  // protocol reads 8-byte words of an f16 tensor of odd length).
  const gpuError_t err = gpuMalloc(&p, std::max<size_t>((bytes + 255) / 256 * 256, 256));
  if (err != gpuSuccess) {
    (void)gpuGetLastError();
    fail("cuda: cannot allocate ", double(bytes) / 1e6, " MB for ", what, " (", double(free_memory()) / 1e6,
         " MB free): ", gpuGetErrorString(err));
  }
  std::lock_guard<std::mutex> lock(alloc_mu_);
  allocations_[p] = bytes;
  allocated_ += bytes;
  return p;
}

void CudaBackend::free(void* p) {
  (void)gpuSetDevice(options_.device);  // (called from destructors: no throw)
  if (!p) return;
  std::lock_guard<std::mutex> lock(alloc_mu_);
  auto it = allocations_.find(p);
  if (it == allocations_.end()) return;
  forget_act_q8();
  (void)gpuStreamSynchronize(S(stream_));
  RF_GPU_CHECK(gpuFree(p));
  allocated_ -= it->second;
  allocations_.erase(it);
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  bind();
  forget_act_q8();
  // Through the pinned staging buffer, in chunks.
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    RF_GPU_CHECK(gpuStreamSynchronize(S(stream_)));  // the staging buffer is free again
    std::memcpy(impl_->staging, s + done, n);
    RF_GPU_CHECK(gpuMemcpyAsync(d + done, impl_->staging, n, gpuMemcpyHostToDevice, S(stream_)));
  }
  RF_GPU_CHECK(gpuStreamSynchronize(S(stream_)));
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  bind();
  RF_GPU_CHECK(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDeviceToHost, S(stream_)));
  RF_GPU_CHECK(gpuStreamSynchronize(S(stream_)));
}

size_t CudaBackend::free_memory() const {
  bind();
  size_t free = 0, total = 0;
  RF_GPU_CHECK(gpuMemGetInfo(&free, &total));
  return free;
}

size_t CudaBackend::total_memory() const {
  bind();
  size_t free = 0, total = 0;
  RF_GPU_CHECK(gpuMemGetInfo(&free, &total));
  return total;
}

Tensor CudaBackend::load_weight(const Tensor& host, const std::string& name) {
  bind();
  Tensor t = host;
  t.data = alloc(host.bytes(), name);
  t.device = DeviceKind::CUDA;
  copy_to_device(t.data, host.data, host.bytes());
  return t;
}

Tensor CudaBackend::load_f32(const float* host, int64_t cols, int64_t rows, const std::string& name) {
  bind();
  Tensor t = make_tensor(alloc(size_t(cols * rows) * 4, name), DType::F32, cols, rows, DeviceKind::CUDA);
  copy_to_device(t.data, host, size_t(cols * rows) * 4);
  return t;
}

void CudaBackend::release_reserved() {
  Impl& I = *impl_;
  clear_graphs();
  release_moe();
  for (void* p : {static_cast<void*>(I.meta_dev), static_cast<void*>(I.rows_dev), static_cast<void*>(I.pen_dev),
                  static_cast<void*>(I.sample_work), static_cast<void*>(I.out_dev), I.dequant, I.packed_out,
                  static_cast<void*>(I.attn.partial_out), static_cast<void*>(I.attn.partial_ml),
                  static_cast<void*>(I.attn.tile_out), static_cast<void*>(I.attn.tile_ml),
                  static_cast<void*>(I.mask_dev), I.shard_dev})
    free(p);
  for (void* p : {static_cast<void*>(I.meta_host), static_cast<void*>(I.rows_host), static_cast<void*>(I.pen_host),
                  static_cast<void*>(I.out_host), static_cast<void*>(I.mask_host), I.shard_host})
    if (p) RF_GPU_CHECK(gpuFreeHost(p));
  I.shard_dev = I.shard_host = nullptr;
  I.mask_dev = I.mask_host = nullptr;
  I.meta_dev = I.meta_host = nullptr;
  I.rows_dev = I.rows_host = nullptr;
  I.pen_dev = I.pen_host = nullptr;
  I.sample_work = nullptr;
  I.out_dev = I.out_host = nullptr;
  I.dequant = nullptr;
  I.packed_out = nullptr;
  I.packed_bytes = 0;
  I.attn.partial_out = I.attn.partial_ml = nullptr;
  I.attn.tile_out = I.attn.tile_ml = nullptr;
  I.attn.max_tile_partials = 0;
  reserved_ = false;
}

void CudaBackend::reserve(const BackendLimits& lim) {
  bind();
  if (reserved_) release_reserved();  // a new model/engine on this backend
  reserved_ = true;
  limits_ = lim;
  Impl& I = *impl_;
  const size_t T = size_t(lim.max_tokens), Sq = size_t(lim.max_seqs), B = size_t(lim.max_blocks_per_seq),
               L = size_t(lim.max_logits), G = size_t(std::max(lim.kv_groups, 1));
  I.off_tokens = 0;
  I.off_pos = I.off_tokens + T;
  I.off_slots = I.off_pos + T;
  I.off_tseq = I.off_slots + G * T;
  I.off_starts = I.off_tseq + T;
  I.off_ctx = I.off_starts + Sq + 1;
  I.off_logits = I.off_ctx + Sq;
  // Query tiles: one per 16 tokens of a sequence and one per sequence at
  // most, plus the extra parts of split tiles; split records after them.
  const size_t P = size_t(std::max(options_.prefill_tile_partials, 0));
  constexpr size_t kTileInts = sizeof(QueryTile) / 4, kSplitInts = sizeof(QuerySplit) / 4;
  I.off_tiles = I.off_logits + L;
  I.off_qsplits = I.off_tiles + kTileInts * (T / kQueryTileTokens + Sq + P);
  I.off_decode = I.off_qsplits + kSplitInts * P;
  I.off_split = I.off_decode + T;
  I.off_tables = I.off_split + 4;
  I.meta_ints = I.off_tables + G * Sq * B;
  I.meta_dev = static_cast<int32_t*>(alloc(I.meta_ints * 4, "step metadata"));
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&I.meta_host), I.meta_ints * 4, gpuHostAllocDefault));

  I.rows_dev = static_cast<gpu::SampleRowDevice*>(alloc(L * sizeof(gpu::SampleRowDevice), "sampling params"));
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&I.rows_host), L * sizeof(gpu::SampleRowDevice), gpuHostAllocDefault));
  I.pen_capacity = L * (B * 64 + 256);
  I.pen_dev = static_cast<PenaltyToken*>(alloc(I.pen_capacity * sizeof(PenaltyToken), "penalty tokens"));
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&I.pen_host), I.pen_capacity * sizeof(PenaltyToken), gpuHostAllocDefault));
  I.sample_work = static_cast<float*>(alloc(L * size_t(lim.vocab) * 4, "sampling workspace"));
  I.mask_words = (size_t(std::max(lim.vocab, lim.vocab_total)) + 31) / 32;  // masks span the whole vocabulary
  I.mask_dev = static_cast<uint32_t*>(alloc(L * I.mask_words * 4, "sampling masks"));
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&I.mask_host), L * I.mask_words * 4, gpuHostAllocDefault));
  I.out_dev = static_cast<gpu::SampleOutDevice*>(alloc(L * sizeof(gpu::SampleOutDevice), "sampling results"));
  if (lim.vocab_total > lim.vocab) {  // a tensor-parallel rank: vocabulary-parallel sampling's buffers
    const gpu::ShardLayout layout(L);
    I.shard_dev = alloc(layout.bytes, "vocabulary-parallel sampling");
    RF_GPU_CHECK(gpuHostAlloc(&I.shard_host, layout.bytes, gpuHostAllocDefault));
  }
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&I.out_host), L * sizeof(gpu::SampleOutDevice), gpuHostAllocDefault));

  I.dequant_bytes = std::min(options_.dequant_scratch_bytes, size_t(std::max<int64_t>(lim.max_weight_elems, 1)) * 2);
  I.dequant = alloc(I.dequant_bytes, "matmul dequantization scratch");
  if (options_.packed_qkv) {
    // Rows of q + k + v columns, or of gate + up ones.
    const size_t width = std::max<size_t>(size_t(std::max(lim.n_heads + 2 * lim.n_kv_heads, 0)) *
                                              size_t(std::max(lim.head_dim, 0)),
                                          options_.packed_gate_up ? 2 * size_t(std::max(lim.n_ff, 0)) : 0);
    I.packed_bytes = size_t(std::min(lim.max_tokens, kPackedQkvMaxRows)) * width * 2;
    if (I.packed_bytes) I.packed_out = alloc(I.packed_bytes, "packed q/k/v or gate/up outputs");
  }

  I.attn.max_splits = options_.max_attention_splits;
  I.attn.max_tokens = std::min(lim.max_tokens, 256);
  const size_t per = size_t(I.attn.max_tokens) * size_t(std::max(lim.n_heads, 1)) * size_t(I.attn.max_splits);
  I.attn.partial_out = static_cast<float*>(alloc(per * size_t(std::max(lim.head_dim, 1)) * 4, "attention partials"));
  I.attn.partial_ml = static_cast<float*>(alloc(per * 2 * 4, "attention partial stats"));
  // Split prefill tiles (query_tiles.h), for the prefill kernel that runs.
  I.tile_balance = TileBalance{};
  const int group = lim.n_heads / std::max(lim.n_kv_heads, 1);
  const gpu::PrefillTiling tiling = gpu::prefill_tiling(options_, lim.head_dim, group);
  if (P > 0 && lim.n_heads > 0 && lim.n_kv_heads > 0 && lim.n_heads % lim.n_kv_heads == 0 && tiling.key_tile > 0) {
    I.tile_balance.key_tile = tiling.key_tile;
    I.tile_balance.blocks_per_tile = lim.n_heads / tiling.heads_per_block;
    I.tile_balance.slots = n_sms_ * gpu::prefill_blocks_per_sm(tiling, lim.head_dim);
    I.tile_balance.max_partials = int(P);
    const size_t rows = P * kQueryTileTokens * size_t(lim.n_heads);
    I.attn.tile_out = static_cast<float*>(alloc(rows * size_t(lim.head_dim) * 4, "split prefill tiles' partials"));
    I.attn.tile_ml = static_cast<float*>(alloc(rows * 2 * 4, "split prefill tiles' statistics"));
    I.attn.max_tile_partials = int(P);
  }
  reserve_moe(lim);
}

StepMeta CudaBackend::upload_step(const Batch& b) {
  RF_CHECK(reserved_, "cuda: reserve() must precede steps");
  pending_norm_ = {};  // (a step that threw may have left one)
  Impl& I = *impl_;
  const int32_t nt = b.n_tokens(), ns = b.n_seqs(), nl = b.n_logits();
  const int32_t ng = b.n_groups();
  RF_CHECK(nt <= limits_.max_tokens && ns <= limits_.max_seqs && nl <= limits_.max_logits &&
               b.max_blocks_per_seq == limits_.max_blocks_per_seq && ng >= 1 && ng <= limits_.kv_groups,
           "cuda: batch exceeds the reserved limits");
  // The previous upload must have left the pinned buffer.
  RF_GPU_CHECK(gpuEventSynchronize(I.meta_copied));
  int32_t* h = I.meta_host;
  std::memcpy(h + I.off_tokens, b.token_ids.data(), size_t(nt) * 4);
  std::memcpy(h + I.off_pos, b.positions.data(), size_t(nt) * 4);
  std::memcpy(h + I.off_tseq, b.token_seq.data(), size_t(nt) * 4);
  std::memcpy(h + I.off_starts, b.seq_starts.data(), size_t(ns + 1) * 4);
  std::memcpy(h + I.off_ctx, b.context_lens.data(), size_t(ns) * 4);
  std::memcpy(h + I.off_logits, b.logits_rows.data(), size_t(nl) * 4);
  const size_t table_ints = size_t(ns) * size_t(b.max_blocks_per_seq);
  for (int32_t g = 0; g < ng; ++g) {
    const Batch::Group& gr = b.groups[size_t(g)];
    RF_CHECK(int32_t(gr.slot_mapping.size()) == nt && gr.block_tables.size() == table_ints,
             "cuda upload_step: KV group arrays of the wrong size");
    std::memcpy(h + I.off_slots + size_t(g) * size_t(limits_.max_tokens), gr.slot_mapping.data(), size_t(nt) * 4);
    std::memcpy(h + I.off_tables + size_t(g) * table_ints, gr.block_tables.data(), table_ints * 4);
  }
  // Query tiles of up to 16 tokens within each sequence (prefill attention):
  // the multi-token sequences' first (planned: split over their keys where
  // that balances the GPU, longest first), then the single-token ones',
  // whose tokens a step mixing both also lists for the decode kernel.
  const bool mixed = b.max_new_tokens() > 1;
  int32_t n_tiles = 0, n_prompt_tiles = 0, n_decode = 0, decode_ctx = 0, n_splits = 0;
  auto* tiles = reinterpret_cast<QueryTile*>(h + I.off_tiles);
  I.tile_spans.clear();
  for (int32_t sq = 0; sq < ns; ++sq) {
    const int32_t first = b.seq_starts[size_t(sq)], end = b.seq_starts[size_t(sq) + 1];
    if (end - first > 1)
      for (int32_t t = first; t < end; t += kQueryTileTokens) {
        const int32_t count = std::min(kQueryTileTokens, end - t);
        I.tile_spans.push_back(TileSpan{t, count, b.positions[size_t(t + count - 1)]});
      }
  }
  if (!I.tile_spans.empty()) {
    QueryTilePlan& plan = I.tile_plan;
    plan_query_tiles(I.tile_spans, I.tile_balance, plan);
    std::copy(plan.tiles.begin(), plan.tiles.end(), tiles);
    std::copy(plan.splits.begin(), plan.splits.end(), reinterpret_cast<QuerySplit*>(h + I.off_qsplits));
    n_tiles = n_prompt_tiles = int32_t(plan.tiles.size());
    n_splits = int32_t(plan.splits.size());
  }
  for (int32_t sq = 0; sq < ns; ++sq) {
    const int32_t first = b.seq_starts[size_t(sq)], end = b.seq_starts[size_t(sq) + 1];
    if (end - first != 1) continue;
    tiles[n_tiles++] = QueryTile{first, 1, 0, INT32_MAX, -1};
    if (mixed) {
      h[I.off_decode + size_t(n_decode++)] = first;
      decode_ctx = std::max(decode_ctx, b.context_lens[size_t(sq)]);
    }
  }
  // Decode attention splits the longest context evenly over a fixed number of
  // slices (at least attention_min_split_keys each); in a mixed step, that of
  // the single-token sequences.
  const int32_t max_ctx = mixed ? decode_ctx : b.max_context_len();
  const int32_t slices = decode_slices(b.max_blocks_per_seq * b.block_size, mixed ? n_decode : nt);
  h[I.off_split] = std::max<int32_t>(std::max(options_.attention_min_split_keys, 1), (max_ctx + slices - 1) / slices);
  const size_t used = I.off_tables + size_t(ng) * table_ints;
  RF_GPU_CHECK(gpuMemcpyAsync(I.meta_dev, h, used * 4, gpuMemcpyHostToDevice, S(stream_)));
  RF_GPU_CHECK(gpuEventRecord(I.meta_copied, S(stream_)));
  StepMeta m;
  m.token_ids = I.meta_dev + I.off_tokens;
  m.positions = I.meta_dev + I.off_pos;
  m.slot_mapping = I.meta_dev + I.off_slots;
  m.token_seq = I.meta_dev + I.off_tseq;
  m.seq_starts = I.meta_dev + I.off_starts;
  m.context_lens = I.meta_dev + I.off_ctx;
  m.block_tables = I.meta_dev + I.off_tables;
  m.logits_rows = I.meta_dev + I.off_logits;
  m.q_tiles = reinterpret_cast<const QueryTile*>(I.meta_dev + I.off_tiles);
  m.q_splits = reinterpret_cast<const QuerySplit*>(I.meta_dev + I.off_qsplits);
  m.n_q_splits = n_splits;
  m.attn_split_len = I.meta_dev + I.off_split;
  m.n_q_tiles = n_tiles;
  m.n_prompt_tiles = mixed ? n_prompt_tiles : n_tiles;
  m.decode_tokens = I.meta_dev + I.off_decode;
  m.n_decode_tokens = n_decode;
  m.n_tokens = nt;
  m.n_seqs = ns;
  m.n_logits = nl;
  m.max_blocks_per_seq = b.max_blocks_per_seq;
  m.block_size = b.block_size;
  m.max_new_tokens = b.max_new_tokens();
  m.max_context_len = b.max_context_len();
  m.n_groups = ng;
  m.group_slot_stride = limits_.max_tokens;
  m.group_table_stride = int64_t(table_ints);
  return m;
}

void CudaBackend::embed(const Tensor& table, const StepMeta& m, Tensor& out) {
  OpTimer timer(profiler(), "embed");
  RF_CHECK(out.type == DType::F32 && out.cols() == table.cols(), "cuda embed: output must be f32 [n, embd]");
  gpu::embed_rows(table.type, table.data, table.row_bytes(), int(table.cols()), m.token_ids, m.n_tokens,
                  int(table.rows()), out.ptr<float>(), ctx());
}

void CudaBackend::embed_range(const Tensor& table, int64_t first, const StepMeta& m, Tensor& out) {
  OpTimer timer(profiler(), "embed");
  RF_CHECK(out.type == DType::F32 && out.cols() == table.cols(), "cuda embed_range: output must be f32 [n, embd]");
  gpu::embed_rows_range(table.type, table.data, table.row_bytes(), int(table.cols()), m.token_ids, m.n_tokens,
                        int(first), int(table.rows()), true, out.ptr<float>(), ctx());
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  OpTimer timer(profiler(), "rms_norm");
  RF_CHECK((x.type == DType::F32 || x.type == DType::F16) && w.type == DType::F32 && w.cols() == x.cols() &&
               (out.type == DType::F32 || out.type == DType::F16) && out.cols() == x.cols() && out.rows() >= x.rows(),
           "cuda rms_norm: bad inputs");
  check_not_pending(x, "cuda rms_norm");
  overwritten(out);
  gpu::rms_norm(x.data, x.type, w.ptr<float>(), out.data, out.type, int(x.rows()), int(x.cols()), eps, ctx());
}

bool CudaBackend::gemv_quantizes_activations(DType w_type, int n, int k) const {
  return act_q8_ && gpu::gemv_quantizes_activations(options_, warp_size_, w_type, n, k);
}

bool CudaBackend::expert_down_quantizes_activations(DType w_type, int k, int n_used) const {
  return act_q8_ && (gpu::moe_down_combined_supported(options_, w_type, k, n_used) ||
                     gpu::gemv_expert_rows_quantize_activations(options_, warp_size_, w_type, k));
}

void CudaBackend::matmul(const Tensor& x, const Tensor& w, Tensor& out) {
  const int n = int(x.rows()), k = int(w.cols()), m = int(w.rows());
  RF_CHECK(x.type == DType::F16 && x.cols() == k, "cuda matmul: x must be f16 [n, ", k, "], is ", x.shape_string());
  RF_CHECK(out.cols() == m && out.rows() >= n, "cuda matmul: out is ", out.shape_string());
  RF_CHECK(reserved_, "cuda: reserve() must precede matmul");
  const int fp8_chunk = fp8_matmul_chunk(w, n, out.type);
  const bool wgmma = options_.wgmma && gpu::wgmma_matmul_supported(w.type, k);
  const bool mma = fp8_chunk == 0 && n > 8 && n <= options_.mma_max_rows_quant &&
                   (wgmma || gpu::mma_matmul_supported(w.type, k));
  OpTimer timer(profiler(),
                profiler() ? str("matmul ",
                                 n <= 8                 ? "gemv"
                                 : fp8_chunk > 0        ? "fp8 tensor cores"
                                 : mma                  ? "mma"
                                 : w.type == DType::F16 ? "blas"
                                                        : "dequant+blas",
                                 " ", dtype_name(w.type), " n", n <= 8 ? str(n) : (n <= 64 ? str("<=64") : str(">64")),
                                 " m", m, " k", k)
                           : std::string());
  check_not_pending(x, "cuda matmul");
  if (n <= 8) {
    gpu::gemv(w.type, w.data, w.row_bytes(), m, k, x.data, n, out.data, out.type, ctx());
    return;
  }
  if (fp8_chunk > 0) {
    matmul_fp8(x, w, out, fp8_chunk);
    return;
  }
  if (mma) {
    // 64 activation rows per launch; the k-split partials live in the
    // dequantization scratch (unused on this path).
    const size_t out_elem = out.type == DType::F32 ? 4 : 2;
    for (int c0 = 0; c0 < n; c0 += 64) {
      const int rows = std::min(64, n - c0);
      const auto* xc = static_cast<const uint8_t*>(x.data) + size_t(c0) * k * 2;
      auto* oc = static_cast<uint8_t*>(out.data) + size_t(c0) * m * out_elem;
      int splits = wgmma ? gpu::wgmma_matmul_splits(w.type, m, k, rows, n_sms_, options_.wgmma_split_cost)
                         : gpu::mma_matmul_splits(m, k, n_sms_);
      while (splits > 1 && size_t(splits) * size_t(rows) * size_t(m) * 4 > impl_->dequant_bytes) --splits;
      auto* partials = static_cast<float*>(impl_->dequant);
      if (wgmma)
        gpu::wgmma_matmul(w.type, w.data, w.row_bytes(), m, k, xc, rows, oc, out.type, splits, partials, ctx());
      else
        gpu::mma_matmul(w.type, w.data, w.row_bytes(), m, k, xc, rows, oc, out.type, splits, partials, ctx());
    }
    return;
  }
  if (w.type == DType::F16) {
    impl_->blas->gemm_f16(x.data, w.data, out.data, out.type, n, m, k, m);
    return;
  }
  // Dequantize chunks of weight rows into scratch, then GEMM each chunk into
  // the matching output columns.
  const int chunk = int(std::max<size_t>(1, impl_->dequant_bytes / (size_t(k) * 2)));
  const size_t out_elem = out.type == DType::F32 ? 4 : 2;
  for (int r0 = 0; r0 < m; r0 += chunk) {
    const int rows = std::min(chunk, m - r0);
    gpu::dequant_rows_f16(w.type, w.data, w.row_bytes(), r0, rows, k, impl_->dequant, ctx());
    impl_->blas->gemm_f16(x.data, impl_->dequant, static_cast<uint8_t*>(out.data) + size_t(r0) * out_elem, out.type,
                          n, rows, k, m);
  }
}

namespace {
size_t align256(size_t b) { return (b + 255) / 256 * 256; }
}  // namespace

int CudaBackend::fp8_matmul_chunk(const Tensor& w, int n, DType out_type) {
  const int k = int(w.cols()), m = int(w.rows());
  // Batches the GEMV takes stay there; from fp8_gemm_min_rows rows on, FP8
  // tensor cores take precedence over the f16 tensor-core matmul.
  if (!reserved_ || w.type != DType::F8_E4M3_ROW || options_.fp8_gemm_min_rows <= 0 ||
      n < options_.fp8_gemm_min_rows || n <= 8)
    return 0;
  // The dequantization scratch holds the weights' row scales, then per
  // chunk of activation rows their scales and e4m3 codes.
  const size_t sw_bytes = align256(size_t(m) * 4);
  if (sw_bytes + 512 >= impl_->dequant_bytes) return 0;
  const int chunk = int(std::min<size_t>(size_t(n), (impl_->dequant_bytes - sw_bytes - 512) / (size_t(k) + 4)));
  if (chunk < 1) return 0;
  const int last = n % chunk;
  if (!impl_->blas->gemm_fp8_supported(out_type, chunk, m, k, w.row_bytes(), m) ||
      (last && !impl_->blas->gemm_fp8_supported(out_type, last, m, k, w.row_bytes(), m)))
    return 0;
  return chunk;
}

bool CudaBackend::matmul_runs_fp8(const Tensor& w, int n, DType out_type) {
  bind();
  return fp8_matmul_chunk(w, n, out_type) > 0;
}

void CudaBackend::matmul_fp8(const Tensor& x, const Tensor& w, Tensor& out, int chunk) {
  const int n = int(x.rows()), k = int(w.cols()), m = int(w.rows());
  const size_t sw_bytes = align256(size_t(m) * 4);
  auto* base = static_cast<uint8_t*>(impl_->dequant);
  float* sw = reinterpret_cast<float*>(base);
  float* sx = reinterpret_cast<float*>(base + sw_bytes);
  uint8_t* xq = base + sw_bytes + align256(size_t(chunk) * 4);
  gpu::gather_f8_row_scales(w.data, w.row_bytes(), m, sw, ctx());
  const size_t out_elem = out.type == DType::F32 ? 4 : 2;
  for (int r0 = 0; r0 < n; r0 += chunk) {
    const int rows = std::min(chunk, n - r0);
    gpu::quantize_act_e4m3(static_cast<const uint8_t*>(x.data) + size_t(r0) * k * 2, rows, k, xq, sx, ctx());
    impl_->blas->gemm_fp8(xq, sx, static_cast<const uint8_t*>(w.data) + info(w.type).row_header, w.row_bytes(), sw,
                          static_cast<uint8_t*>(out.data) + size_t(r0) * m * out_elem, out.type, rows, m, k, m);
  }
}

void CudaBackend::rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                                const KVLayer& cache) {
  RF_CHECK(q.type == DType::F16 && k.type == DType::F16 && v.type == DType::F16, "cuda rope: f16 activations");
  OpTimer timer(profiler(), "rope+kv store");
  gpu::rope_store_kv(q.data, k.data, v.data, m, m.n_tokens, int(q.cols() / cache.head_dim), rope, cache, ctx());
}

int CudaBackend::attention_splits(const StepMeta& m) const {
  // Decode steps: a fixed number of key slices (their length is read from
  // the device per step), so that every KV head of every sequence is spread
  // over many blocks. Prefill batches use the tiled kernel instead.
  // A mixed step's single-token sequences take the decode kernel the same
  // way (StepMeta::decode_tokens).
  const int n = m.max_new_tokens > 1 ? m.n_decode_tokens : m.n_tokens;
  if (n > impl_->attn.max_tokens || n == 0) return 1;
  return decode_slices(m.max_blocks_per_seq * m.block_size, n);
}

int CudaBackend::decode_slices(int capacity, int n_tokens) const {
  // About two blocks (tokens x KV heads x slices) per SM fill the GPU
  // without making each block's key range short; at most one slice per 32
  // keys.
  const int target = options_.attention_target_blocks > 0 ? options_.attention_target_blocks : 2 * n_sms_;
  const int per_slice = std::max(1, n_tokens * std::max(limits_.n_kv_heads, 1));
  const int wanted = (target + per_slice - 1) / per_slice;
  const int slices = std::clamp(std::min(wanted, (capacity + 31) / 32), 1, impl_->attn.max_splits);
  // Slices summed by a cluster of their blocks: at most a cluster's worth.
  const int cluster = gpu::decode_cluster_limit(options_, limits_.head_dim);
  return cluster >= 2 ? std::min(slices, cluster) : slices;
}

void CudaBackend::attention(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                            Tensor& out) {
  RF_CHECK(q.type == DType::F16 && out.type == DType::F16, "cuda attention: f16 activations");
  if (p.sinks) unsupported("attention with sinks");
  Impl& I = *impl_;
  const int splits = attention_splits(m);
  const char* kind = m.max_new_tokens == 1    ? "attention decode splits "
                     : m.n_decode_tokens > 0 ? "attention mixed, decode splits "
                                             : nullptr;
  OpTimer timer(profiler(), kind ? str(kind, splits) : std::string("attention prefill"));
  RF_CHECK(p.n_heads <= limits_.n_heads && p.head_dim <= limits_.head_dim, "cuda attention: shape exceeds reserve()");
  gpu::attention(q.data, cache, m, m.n_tokens, p, splits, I.attn, out.data, ctx());
}

void CudaBackend::attention_ext(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                                Tensor& out) {
  // The same kernels: window and soft-cap are arguments of every one.
  attention(q, cache, m, p, out);
}

void CudaBackend::add_bias(Tensor& x, const Tensor& bias) {
  RF_CHECK(x.type == DType::F16 && bias.type == DType::F32 && bias.numel() == x.cols(), "cuda add_bias: f16 x [n, ",
           bias.numel(), "] and f32 bias expected, x is ", x.shape_string());
  OpTimer timer(profiler(), "add_bias");
  gpu::add_bias_f16(x.data, bias.ptr<float>(), x.rows(), int(x.cols()), ctx());
}

void CudaBackend::geglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.type == DType::F16 && up.type == DType::F16 && out.type == DType::F16, "cuda geglu: f16 only");
  RF_CHECK(gate.numel() == up.numel() && out.numel() >= gate.numel(), "cuda geglu: bad shapes");
  OpTimer timer(profiler(), "geglu");
  gpu::geglu(gate.data, up.data, out.data, gate.numel(), ctx());
}

void CudaBackend::scale(Tensor& x, float s) {
  RF_CHECK(x.type == DType::F32, "cuda scale: f32 only");
  OpTimer timer(profiler(), "scale");
  gpu::scale_f32(x.ptr<float>(), s, x.numel(), ctx());
}

void CudaBackend::softcap(Tensor& x, float cap) {
  RF_CHECK(x.type == DType::F32 && cap > 0.0f, "cuda softcap: f32 and a positive cap");
  OpTimer timer(profiler(), "softcap");
  gpu::softcap_f32(x.ptr<float>(), cap, x.numel(), ctx());
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  RF_CHECK(gate.type == DType::F16 && up.type == DType::F16 && out.type == DType::F16, "cuda swiglu: f16 only");
  OpTimer timer(profiler(), "swiglu");
  gpu::swiglu(gate.data, up.data, out.data, gate.numel(), ctx());
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  RF_CHECK(a.type == DType::F32 && out.data == a.data && b.type == DType::F16 && a.numel() == b.numel(),
           "cuda add: supports residual (f32) += f16 in place");
  OpTimer timer(profiler(), "add");
  gpu::add_f16_to_f32(out.ptr<float>(), b.data, a.numel(), ctx());
}

void CudaBackend::gather_rows(const Tensor& x, const StepMeta& m, Tensor& out) {
  const size_t bytes = row_bytes(x.type, uint64_t(x.cols()));
  RF_CHECK((x.type == DType::F32 || x.type == DType::F16) && out.type == x.type && out.cols() == x.cols() &&
               out.rows() >= m.n_logits && bytes % 4 == 0,
           "cuda gather_rows: f32 or f16 rows of 4-byte words, the same on both sides");
  OpTimer timer(profiler(), "gather");
  gpu::gather_rows(x.data, m.logits_rows, m.n_logits, int(bytes / 4), out.data, ctx());
}

void CudaBackend::upload_sample_rows(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties) {
  Impl& I = *impl_;
  const int n = int(rows.size());
  RF_CHECK(n <= limits_.max_logits, "cuda sample: too many rows");
  RF_CHECK(penalties.size() <= I.pen_capacity, "cuda sample: ", penalties.size(), " penalty tokens exceed capacity ",
           I.pen_capacity);
  size_t n_masked = 0;
  for (int i = 0; i < n; ++i) {
    const SampleRow& r = rows[size_t(i)];
    gpu::SampleRowDevice& d = I.rows_host[i];
    d.temperature = r.params.temperature;
    d.top_p = r.params.top_p;
    d.min_p = r.params.min_p;
    d.repetition_penalty = r.params.repetition_penalty;
    d.presence_penalty = r.params.presence_penalty;
    d.frequency_penalty = r.params.frequency_penalty;
    d.top_k = r.params.top_k;
    d.top_logprobs = std::clamp(r.params.top_logprobs, 0, kMaxTopLogprobs);
    d.penalty_offset = r.penalty_offset;
    d.penalty_count = r.penalty_count;
    d.mask_offset = -1;
    if (r.allowed) {  // packed after the previous masked rows
      d.mask_offset = int32_t(n_masked * I.mask_words);
      std::memcpy(I.mask_host + n_masked * I.mask_words, r.allowed, I.mask_words * 4);
      ++n_masked;
    }
    d.seed = r.params.seed;
    d.counter = r.rng_counter;
  }
  RF_GPU_CHECK(gpuMemcpyAsync(I.rows_dev, I.rows_host, size_t(n) * sizeof(gpu::SampleRowDevice),
                              gpuMemcpyHostToDevice, S(stream_)));
  if (n_masked > 0)  // one small upload for the step's masks
    RF_GPU_CHECK(gpuMemcpyAsync(I.mask_dev, I.mask_host, n_masked * I.mask_words * 4, gpuMemcpyHostToDevice,
                                S(stream_)));
  if (!penalties.empty()) {
    std::memcpy(I.pen_host, penalties.data(), penalties.size() * sizeof(PenaltyToken));
    RF_GPU_CHECK(gpuMemcpyAsync(I.pen_dev, I.pen_host, penalties.size() * sizeof(PenaltyToken), gpuMemcpyHostToDevice,
                                S(stream_)));
  }
}

void CudaBackend::sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                         std::vector<SampleResult>& out) {
  Impl& I = *impl_;
  const int n = int(rows.size());
  RF_CHECK(logits.type == DType::F32 && logits.cols() <= limits_.vocab, "cuda sample: bad logits");
  upload_sample_rows(rows, penalties);
  {
    OpTimer timer(profiler(), "sample");
    gpu::sample(logits.ptr<float>(), n, int(logits.cols()), I.rows_dev, I.pen_dev, I.mask_dev, I.sample_work, I.out_dev,
                ctx());
  }
  RF_GPU_CHECK(gpuMemcpyAsync(I.out_host, I.out_dev, size_t(n) * sizeof(gpu::SampleOutDevice), gpuMemcpyDeviceToHost,
                              S(stream_)));
  RF_GPU_CHECK(gpuStreamSynchronize(S(stream_)));
  if (profiler()) profiler()->collect();
  out.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    const gpu::SampleOutDevice& o = I.out_host[i];
    out[size_t(i)].token = o.token;
    out[size_t(i)].logprob = o.logprob;
    out[size_t(i)].top.clear();
    for (int j = 0; j < I.rows_host[i].top_logprobs; ++j) out[size_t(i)].top.emplace_back(o.top_ids[j], o.top_logprobs[j]);
  }
}

void CudaBackend::synchronize() { RF_GPU_CHECK(gpuStreamSynchronize(S(stream_))); }

void CudaBackend::bind() const { RF_GPU_CHECK(gpuSetDevice(options_.device)); }

namespace {
// The fused GEMV paths need a few activation rows, f16 input and weights of
// one type and width.
bool gemv_fusable(const Tensor& x, std::span<const Tensor> ws) {
  if (x.type != DType::F16 || x.rows() > 8 || ws.empty()) return false;
  for (const Tensor& w : ws)
    if (w.type != ws[0].type || w.cols() != ws[0].cols() || w.cols() != x.cols()) return false;
  return true;
}
}  // namespace

void CudaBackend::matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                               std::span<const Tensor> biases) {
  RF_CHECK(ws.size() == outs.size(), "matmul_multi: weights and outputs differ in number");
  RF_CHECK(biases.empty() || biases.size() == ws.size(), "matmul_multi: biases and weights differ in number");
  bool same_out = true;
  for (const Tensor& o : outs) same_out = same_out && o.type == outs[0].type;
  gpu::GemvNormFusion norm;
  if (take_pending_norm(x, norm.eps)) {
    // matmul_add_rms_norm checked that these weights take the fused GEMV.
    norm.x_rms = true;
    RF_CHECK(gemv_fusable(x, ws) && ws.size() <= 3 && same_out, "cuda matmul_multi: an un-normed row for weights "
             "that cannot norm it");
  }
  if (!gemv_fusable(x, ws) && ws.size() > 1 && x.type == DType::F16 && x.rows() <= 8) {
    // Mixed formats (q4_k_m keeps some layers' V in Q6_K): the run of the
    // first format fuses, the rest goes on its own.
    size_t run = 1;
    while (run < ws.size() && ws[run].type == ws[0].type) ++run;
    if (run < ws.size() && two_format_gemv(x, ws, outs, biases, run)) return;
    if (run < ws.size()) {
      auto part = [&](size_t from, size_t count) {
        matmul_multi(x, ws.subspan(from, count), outs.subspan(from, count),
                     biases.empty() ? biases : biases.subspan(from, count));
      };
      part(0, run);
      part(run, ws.size() - run);
      return;
    }
  }
  if (packed_matmul(x, ws, outs, biases)) return;
  if (!gemv_fusable(x, ws) || ws.size() > 3 || !same_out) return Backend::matmul_multi(x, ws, outs, biases);
  OpTimer timer(profiler(),
                profiler() ? str("matmul gemv x", ws.size(), " ", dtype_name(ws[0].type), " n", x.rows(), " k", x.cols())
                           : std::string());
  gpu::GemvSegment segs[3];
  for (size_t i = 0; i < ws.size(); ++i) {
    RF_CHECK(outs[i].cols() == ws[i].rows(), "matmul_multi: output ", i, " has the wrong width");
    const Tensor* bias = biases.empty() || !biases[i].data ? nullptr : &biases[i];
    RF_CHECK(!bias || (bias->type == DType::F32 && bias->cols() == ws[i].rows()), "matmul_multi: bias ", i,
             " must be f32 of the output's width");
    segs[i] = {ws[i].data, outs[i].data, int(ws[i].rows()), bias ? bias->ptr<float>() : nullptr};
  }
  gpu::gemv_segments(ws[0].type, segs, int(ws.size()), nullptr, false, ws[0].row_bytes(), int(x.cols()), x.data,
                     int(x.rows()), outs[0].type, ctx(), norm.x_rms ? &norm : nullptr);
}

bool CudaBackend::two_format_gemv(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                                  std::span<const Tensor> biases, size_t run) {
  if (x.rows() != 1 || x.type != DType::F16 || ws.size() > 3) return false;
  for (size_t i = run; i < ws.size(); ++i)
    if (ws[i].type != ws[run].type) return false;
  gpu::GemvSegment segs[3];
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor* bias = biases.empty() || !biases[i].data ? nullptr : &biases[i];
    if (outs[i].type != DType::F16 || outs[i].cols() != ws[i].rows() || ws[i].cols() != x.cols() ||
        (bias && (bias->type != DType::F32 || bias->cols() != ws[i].rows())))
      return false;
    segs[i] = {ws[i].data, outs[i].data, int(ws[i].rows()), bias ? bias->ptr<float>() : nullptr};
  }
  OpTimer timer(profiler(), profiler() ? str("matmul gemv x", run, " ", dtype_name(ws[0].type), " + x", ws.size() - run,
                                             " ", dtype_name(ws[run].type), " n1 k", x.cols())
                                       : std::string());
  return gpu::gemv_segments_two_formats(ws[0].type, segs, int(run), ws[0].row_bytes(), ws[run].type, segs + run,
                                        int(ws.size() - run), ws[run].row_bytes(), int(x.cols()), x.data, ctx());
}

bool CudaBackend::packed_matmul(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                                std::span<const Tensor> biases) {
  const int n = int(x.rows());
  if (n <= 8 || ws.size() < 2 || ws.size() > size_t(gpu::ColumnSegments::kMax) || x.type != DType::F16) return false;
  gpu::ColumnSegments segs;
  int width = 0;
  const auto* next = static_cast<const uint8_t*>(ws[0].data);
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor* bias = biases.empty() || !biases[i].data ? nullptr : &biases[i];
    if (ws[i].data != next || ws[i].type != ws[0].type || ws[i].cols() != x.cols() || ws[i].rows() % 8 != 0 ||
        outs[i].type != DType::F16 || outs[i].cols() != ws[i].rows() ||
        (bias && (bias->type != DType::F32 || bias->cols() != ws[i].rows())))
      return false;
    next += ws[i].bytes();
    segs.dst[i] = outs[i].data;
    segs.bias[i] = bias ? bias->ptr<float>() : nullptr;
    segs.cols[i] = int(ws[i].rows());
    width += segs.cols[i];
  }
  segs.count = int(ws.size());
  if (size_t(n) * size_t(width) * 2 > impl_->packed_bytes) return false;
  Tensor together = make_tensor(ws[0].data, ws[0].type, x.cols(), width, DeviceKind::CUDA);
  Tensor scratch = make_tensor(impl_->packed_out, DType::F16, width, n, DeviceKind::CUDA);
  matmul(x, together, scratch);
  OpTimer timer(profiler(), "split packed outputs");
  gpu::split_columns_f16(impl_->packed_out, n, width, segs, ctx());
  return true;
}

void CudaBackend::matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate,
                                     Tensor& up, Tensor& out, Activation act) {
  if (act == Activation::SiLUClampedOai) unsupported("matmul_gate_up_glu (clamped SwiGLU)");
  const Tensor pair[2] = {w_gate, w_up};
  gpu::GemvNormFusion norm;
  if (take_pending_norm(x, norm.eps)) {
    norm.x_rms = true;  // (matmul_add_rms_norm checked these weights)
    RF_CHECK(gemv_fusable(x, pair) && w_gate.rows() == w_up.rows() && out.type == DType::F16,
             "cuda matmul_gate_up_glu: an un-normed row for weights that cannot norm it");
  }
  if (!norm.x_rms && packed_gate_up(x, w_gate, w_up, out, act)) return;
  if (!gemv_fusable(x, pair) || w_gate.rows() != w_up.rows() || out.type != DType::F16)
    return Backend::matmul_gate_up_glu(x, w_gate, w_up, gate, up, out, act);
  const bool gelu = act == Activation::GeluTanh;
  OpTimer timer(profiler(), profiler() ? str("matmul gemv gate*up", gelu ? " gelu " : " ", dtype_name(w_gate.type),
                                             " n", x.rows(), " m", w_gate.rows(), " k", x.cols())
                                       : std::string());
  const gpu::GemvSegment seg{w_gate.data, out.data, int(w_gate.rows())};
  gpu::gemv_segments(w_gate.type, &seg, 1, w_up.data, gelu, w_gate.row_bytes(), int(x.cols()), x.data, int(x.rows()),
                     DType::F16, ctx(), norm.x_rms ? &norm : nullptr);
}

bool CudaBackend::packed_gate_up(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& out,
                                 Activation act) {
  const int n = int(x.rows()), ff = int(w_gate.rows());
  const bool adjacent = static_cast<const uint8_t*>(w_gate.data) + w_gate.bytes() == w_up.data &&
                        w_up.type == w_gate.type && w_up.rows() == ff && w_up.cols() == w_gate.cols();
  if (!options_.packed_gate_up || n <= 8 || !adjacent || x.type != DType::F16 || out.type != DType::F16 ||
      out.cols() != ff || size_t(n) * size_t(2 * ff) * 2 > impl_->packed_bytes)
    return false;
  Tensor together = make_tensor(w_gate.data, w_gate.type, w_gate.cols(), 2 * int64_t(ff), DeviceKind::CUDA);
  Tensor scratch = make_tensor(impl_->packed_out, DType::F16, 2 * int64_t(ff), n, DeviceKind::CUDA);
  matmul(x, together, scratch);
  OpTimer timer(profiler(), act == Activation::GeluTanh ? "geglu (packed)" : "swiglu (packed)");
  gpu::glu_packed(impl_->packed_out, n, ff, out.data, act == Activation::GeluTanh, ctx());
  return true;
}

void CudaBackend::rms_norm_pair(const Tensor& a, const Tensor& wa, Tensor& a_out, const Tensor& b, const Tensor& wb,
                                Tensor& b_out, float eps) {
  const bool f16 = a.type == DType::F16 && b.type == DType::F16 && a_out.type == DType::F16 &&
                   b_out.type == DType::F16 && a.cols() == b.cols();
  if (!f16) return Backend::rms_norm_pair(a, wa, a_out, b, wb, b_out, eps);
  RF_CHECK(wa.type == DType::F32 && wb.type == DType::F32 && wa.cols() == a.cols() && wb.cols() == b.cols() &&
               a_out.rows() >= a.rows() && b_out.rows() >= b.rows(),
           "cuda rms_norm_pair: bad inputs");
  OpTimer timer(profiler(), "rms_norm x2");
  gpu::rms_norm_pair_f16(a.data, wa.ptr<float>(), a_out.data, int(a.rows()), b.data, wb.ptr<float>(), b_out.data,
                         int(b.rows()), int(a.cols()), eps, ctx());
}

void CudaBackend::qk_norm_rope_store_kv(const Tensor& q_raw, const Tensor& wq, const Tensor& k_raw, const Tensor& wk,
                                        float eps, Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m,
                                        const RopeParams& rope, const KVLayer& cache) {
  const int hd = cache.head_dim;
  if (!options_.fused_qk_norm_rope || cache.type != DType::F16 || !gpu::qk_norm_rope_fusable(hd, warp_size_))
    return Backend::qk_norm_rope_store_kv(q_raw, wq, k_raw, wk, eps, q, k, v, m, rope, cache);
  RF_CHECK(q_raw.type == DType::F16 && k_raw.type == DType::F16 && q.type == DType::F16 && k.type == DType::F16 &&
               v.type == DType::F16 && wq.type == DType::F32 && wk.type == DType::F32 && wq.cols() == hd &&
               wk.cols() == hd && q_raw.cols() == q.cols() && k_raw.cols() == k.cols() && q.cols() % hd == 0,
           "cuda qk_norm_rope_store_kv: bad inputs");
  OpTimer timer(profiler(), "q/k norms+rope+kv store");
  gpu::qk_norm_rope_store_kv(q_raw.data, wq.ptr<float>(), k_raw.data, wk.ptr<float>(), eps, q.data, k.data, v.data, m,
                             m.n_tokens, int(q.cols() / hd), rope, cache, ctx());
}

void CudaBackend::add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
  RF_CHECK(x.type == DType::F32 && y.type == DType::F16 && w.type == DType::F32 && x.numel() == y.numel() &&
               w.cols() == x.cols(),
           "cuda add_rms_norm: bad inputs");
  OpTimer timer(profiler(), "add+rms_norm");
  overwritten(out);
  gpu::add_rms_norm(x.ptr<float>(), y.data, nullptr, w.ptr<float>(), out.data, out.type, int(x.rows()), int(x.cols()),
                    eps, ctx());
}

void CudaBackend::matmul_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& out, Tensor& residual,
                                      const Tensor& norm_w, float eps, Tensor& next,
                                      std::span<const Tensor> consumers) {
  const int m = int(w.rows()), k = int(w.cols());
  // One token, f16 weights on both sides, the norm's gain folded into the
  // consumers: the projection adds its rows to the residual and writes the
  // new residual as f16 into next; the consumers' GEMVs norm it.
  bool fuse = x.rows() == 1 && x.type == DType::F16 && x.cols() == k && w.type == DType::F16 &&
              residual.type == DType::F32 && residual.rows() == 1 && residual.cols() == m &&
              next.type == DType::F16 && next.rows() >= 1 && next.cols() == m && out.type == DType::F16 &&
              folded_gains_.count(norm_w.data) > 0 && !consumers.empty() && consumers.size() <= 3 &&
              gpu::gemv_fuses_norm(options_, w.type, w.row_bytes(), false);
  for (const Tensor& c : consumers)
    fuse = fuse && c.type == DType::F16 && c.cols() == m && c.row_bytes() == consumers[0].row_bytes() &&
           gpu::gemv_fuses_norm(options_, c.type, c.row_bytes(), true);
  if (!fuse) return Backend::matmul_add_rms_norm(x, w, out, residual, norm_w, eps, next, consumers);
  check_not_pending(x, "cuda matmul_add_rms_norm");
  OpTimer timer(profiler(),
                profiler() ? str("matmul gemv+residual ", dtype_name(w.type), " m", m, " k", k) : std::string());
  gpu::GemvNormFusion fusion;
  fusion.residual = residual.ptr<float>();
  fusion.residual_f16 = next.data;
  const gpu::GemvSegment seg{w.data, out.data, m};
  gpu::gemv_segments(w.type, &seg, 1, nullptr, false, w.row_bytes(), k, x.data, 1, out.type, ctx(), &fusion);
  pending_norm_ = {next.data, eps};
}

bool CudaBackend::fold_norm_gain(Tensor& gain, std::span<const Tensor> consumers) {
  if (!options_.fold_norm_gains || gain.type != DType::F32 || gain.rows() != 1 || consumers.empty()) return false;
  const int64_t cols = gain.cols();
  for (const Tensor& c : consumers)
    if (c.type != DType::F16 || c.cols() != cols || !gpu::gemv_fuses_norm(options_, c.type, c.row_bytes(), true))
      return false;
  bind();
  const gpu::LaunchCtx c = ctx();
  int* overflow = static_cast<int*>(alloc(sizeof(int), "norm gain check"));
  RF_GPU_CHECK(gpuMemsetAsync(overflow, 0, sizeof(int), S(stream_)));
  for (const Tensor& w : consumers) gpu::check_columns_scale_f16(w.data, w.rows(), cols, gain.ptr<float>(), overflow, c);
  int flag = 0;
  copy_to_host(&flag, overflow, sizeof(int));
  free(overflow);
  if (flag != 0) return false;  // some weight times its gain is past f16's range: the norm keeps its gain
  for (const Tensor& w : consumers) gpu::scale_columns_f16(w.data, w.rows(), cols, gain.ptr<float>(), ctx());
  const std::vector<float> ones(size_t(cols), 1.0f);
  copy_to_device(gain.data, ones.data(), ones.size() * sizeof(float));
  folded_gains_.insert(gain.data);
  return true;
}

bool CudaBackend::take_pending_norm(const Tensor& x, float& eps) {
  if (!pending_norm_.row || x.data != pending_norm_.row) return false;
  eps = pending_norm_.eps;
  pending_norm_ = {};
  return true;
}

void CudaBackend::check_not_pending(const Tensor& x, const char* op) const {
  RF_CHECK(!pending_norm_.row || x.data != pending_norm_.row, op,
           ": reads a row left un-normed for the matmuls after matmul_add_rms_norm");
}

void CudaBackend::add_post_norm_rms_norm(Tensor& x, const Tensor& y, const Tensor& w_y, const Tensor& w, float eps,
                                         Tensor& out) {
  RF_CHECK(x.type == DType::F32 && y.type == DType::F16 && w.type == DType::F32 && w_y.type == DType::F32 &&
               x.numel() == y.numel() && w.cols() == x.cols() && w_y.cols() == x.cols(),
           "cuda add_post_norm_rms_norm: bad inputs");
  OpTimer timer(profiler(), "post_norm+add+rms_norm");
  overwritten(out);
  gpu::add_rms_norm(x.ptr<float>(), y.data, w_y.ptr<float>(), w.ptr<float>(), out.data, out.type, int(x.rows()),
                    int(x.cols()), eps, ctx());
}

void CudaBackend::run_graph(uint64_t key, const std::function<void()>& record) {
  Impl& I = *impl_;
  auto it = I.graphs.find(key);
  // A graph's ops trust no record from before it, nor the ops after it one
  // from inside it.
  forget_act_q8();
  if (it == I.graphs.end()) {
    gpuGraph_t graph;
    gpuGraphExec_t exec;
    RF_GPU_CHECK(gpuStreamBeginCapture(S(stream_), gpuStreamCaptureModeThreadLocal));
    capturing_ = true;
    try {
      record();
    } catch (...) {
      capturing_ = false;
      gpuGraph_t broken = nullptr;
      if (gpuStreamEndCapture(S(stream_), &broken) == gpuSuccess && broken) (void)gpuGraphDestroy(broken);
      (void)gpuGetLastError();
      throw;
    }
    capturing_ = false;
    RF_GPU_CHECK(gpuStreamEndCapture(S(stream_), &graph));
    RF_GPU_CHECK(gpuGraphInstantiate(&exec, graph));
    it = I.graphs.emplace(key, std::make_pair(graph, exec)).first;
  }
  RF_GPU_CHECK(gpuGraphLaunch(it->second.second, S(stream_)));
  forget_act_q8();
}

void CudaBackend::clear_graphs() {
  bind();
  for (auto& [k, g] : impl_->graphs) {
    (void)gpuGraphExecDestroy(g.second);
    (void)gpuGraphDestroy(g.first);
  }
  impl_->graphs.clear();
}

double CudaBackend::measure_copy_bandwidth() {
  bind();
  const size_t bytes = size_t(2) << 30;
  void* a = alloc(bytes, "bandwidth test");
  void* b = alloc(bytes, "bandwidth test");
  const double bw = gpu::copy_bandwidth(a, b, bytes, 10, S(stream_));
  free(a);
  free(b);
  return bw;
}

gpu::OpProfiler* CudaBackend::profiler() const { return impl_->profiler.get(); }

}  // namespace rf
