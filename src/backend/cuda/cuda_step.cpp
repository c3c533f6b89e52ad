// CudaBackend's per-step buffers: reserve() sizes the step metadata,
// sampling, matmul and attention scratch for the largest step of
// BackendLimits (and release_reserved() frees them), and upload_step()
// flattens a Batch into the one metadata buffer with one copy, planning the
// prefill query tiles and the decode attention's key slices on the way.
#include <algorithm>
#include <numeric>
#include <cstring>

#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/attention/attention.cuh"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/sample/sample.cuh"

namespace rf {

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
  I.off_state = I.off_ctx + Sq;
  I.off_logits = I.off_state + Sq;
  // Query tiles: one per 16 tokens of a sequence and one per sequence at
  // most, plus the extra parts of split tiles; split records after them.
  const size_t P = size_t(std::max(tuning_.prefill_tile_partials, 0));
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
  if (tuning_.fusions.packed_qkv) {
    // Rows of q + k + v columns, or of gate + up ones.
    const size_t width = std::max<size_t>(size_t(std::max(lim.n_heads + 2 * lim.n_kv_heads, 0)) *
                                              size_t(std::max(lim.head_dim, 0)),
                                          tuning_.fusions.packed_gate_up ? 2 * size_t(std::max(lim.n_ff, 0)) : 0);
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
  gpu::PrefillTiling tiling = gpu::prefill_tiling(tuning_, lim.head_dim, group);
  if (lim.min_head_dim > 0 && lim.min_head_dim != lim.head_dim) {
    // Layers of two head sizes (Gemma 4): split parts whose bounds are
    // whole key tiles of either size's kernel.
    const int other = gpu::prefill_tiling(tuning_, lim.min_head_dim, group).key_tile;
    if (other > 0) tiling.key_tile = tiling.key_tile > 0 ? std::lcm(tiling.key_tile, other) : other;
  }
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
  const bool has_state = !b.state_slots.empty();
  if (has_state) {
    RF_CHECK(int32_t(b.state_slots.size()) == ns, "cuda upload_step: ", b.state_slots.size(), " state slots for ", ns,
             " sequences");
    std::memcpy(h + I.off_state, b.state_slots.data(), size_t(ns) * 4);
  }
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
  const int32_t slices = decode_slices(b.max_blocks_per_seq * b.block_size, mixed ? n_decode : nt, max_ctx);
  h[I.off_split] = std::max<int32_t>(std::max(tuning_.attention_min_split_keys, 1), (max_ctx + slices - 1) / slices);
  const size_t used = I.off_tables + size_t(ng) * table_ints;
  RF_GPU_CHECK(gpuMemcpyAsync(I.meta_dev, h, used * 4, gpuMemcpyHostToDevice, as_stream(stream_)));
  RF_GPU_CHECK(gpuEventRecord(I.meta_copied, as_stream(stream_)));
  StepMeta m;
  m.token_ids = I.meta_dev + I.off_tokens;
  m.positions = I.meta_dev + I.off_pos;
  m.slot_mapping = I.meta_dev + I.off_slots;
  m.token_seq = I.meta_dev + I.off_tseq;
  m.seq_starts = I.meta_dev + I.off_starts;
  m.context_lens = I.meta_dev + I.off_ctx;
  m.block_tables = I.meta_dev + I.off_tables;
  m.logits_rows = I.meta_dev + I.off_logits;
  m.state_slots = has_state ? I.meta_dev + I.off_state : nullptr;
  m.q_tiles = reinterpret_cast<const QueryTile*>(I.meta_dev + I.off_tiles);
  m.q_splits = reinterpret_cast<const QuerySplit*>(I.meta_dev + I.off_qsplits);
  m.n_q_splits = n_splits;
  m.attn_split_len = I.meta_dev + I.off_split;
  m.decode_slices = slices;
  m.graph_variant = uint32_t(slices);
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

}  // namespace rf
