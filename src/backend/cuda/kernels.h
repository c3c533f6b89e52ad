// Host-side entry points of the GPU kernels (launchers), grouped by the file
// that owns them. Each takes device pointers, sizes and the LaunchCtx
// (stream and options), checks its launch, and throws rf::Error for an
// unsupported type. Activations are f16, the residual stream f32; out_type
// arguments choose f16 or f32 output.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/gpu.h"

namespace rf::gpu {

// One-time setup of the current device for the kernels that need it
// (shared-memory opt-ins above 48 KB): the backend's constructor calls
// these once per device, before any launch.
void gemv_device_setup();       // gemv.cu
void mma_device_setup();        // gemm_mma.cu
void wgmma_device_setup();      // gemm_wgmma.cu
void attention_device_setup();  // attention.cu, attention_decode.cu, attention_prefill.cu

// ---- gemv.cu
// Whether a GEMV of this weight format and shape reads its activations as
// 8-bit quants (the streaming k-quant kernel, gemv_stream.cu: Q4_K or Q6_K,
// one row, k a multiple of 256 of at least 64 warp widths, up to
// kActQ8MaxK).
bool gemv_quantizes_activations(const CudaOptions& options, int warp_size, DType w_type, int n, int k);
// ... and one token's expert GEMVs whose tiles read rows of their own (the
// down projections; CudaOptions::kq_stream_expert_rows, and for rows of
// fewer chunks than a warp's lanes kq_stream_short_expert_rows).
bool gemv_expert_rows_quantize_activations(const CudaOptions& options, int warp_size, DType w_type, int k);
// out[n, m] = x[n, k] (f16) . w[m, k]^T for w of any weight format, n <= 8
// per launch (the launcher loops). out_type F16 or F32.
void gemv(DType w_type, const void* w, size_t w_row_bytes, int m, int k, const void* x, int n, void* out,
          DType out_type, const LaunchCtx& ctx);
// Several weight matrices of one type and width in one launch (each row
// writes its own output [n, rows], plus its f32 bias [rows] if given); with
// w_up (one segment: the gate weights) the output is act(x . gate^T) *
// (x . up^T), act = GELU (tanh, as geglu) if gelu, else SiLU. n <= 8 per launch.
struct GemvSegment {
  const void* w;
  void* out;
  int rows;
  const float* bias = nullptr;
};
// A residual add and RMSNorm folded into batch-1 f16 GEMVs (one activation
// row, weights f16; gemv_fuses_norm says where it applies):
//  - residual (an o or down projection): each output, rounded to f16 as the
//    projection's output would be, is added to residual (f32) and the new
//    residual written as f16 to residual_f16; out is not written;
//  - x_rms (the GEMVs of the next norm's row, x = residual_f16): each dot
//    product is scaled by 1 / sqrt(mean(x^2) + eps) before bias and GLU.
//    The norm's gain must already be folded into their weights
//    (scale_columns_f16).
struct GemvNormFusion {
  float* residual = nullptr;
  void* residual_f16 = nullptr;
  bool x_rms = false;
  float eps = 0.0f;
};
// Whether gemv_segments takes a GemvNormFusion for one activation row of
// these weights (k columns; paired: a gate/up pair).
bool gemv_fuses_norm(const CudaOptions& options, DType w_type, size_t row_bytes, bool paired);
void gemv_segments(DType w_type, const GemvSegment* segs, int n_segs, const void* w_up, bool gelu, size_t row_bytes,
                   int k, const void* x, int n, DType out_type, const LaunchCtx& ctx,
                   const GemvNormFusion* fusion = nullptr);
// Folding a norm's gain into the f16 weights that multiply its output (load
// time): *overflow (device) set to 1 if some w[r, c] * gain[c] would not be
// a finite f16; then w[r, c] = f16(w[r, c] * gain[c]) in place.
void check_columns_scale_f16(const void* w, int64_t rows, int64_t cols, const float* gain, int* overflow,
                             const LaunchCtx& ctx);
void scale_columns_f16(void* w, int64_t rows, int64_t cols, const float* gain, const LaunchCtx& ctx);
// One activation row (f16) by segments of two formats in one launch (f16
// outputs): segs0 in t0, then segs1 in t1 (Q4_K and Q6_K, the streaming
// GEMV; q4_k_m's q/k/v with V in Q6_K). False (nothing launched) where it
// does not apply.
bool gemv_segments_two_formats(DType t0, const GemvSegment* segs0, int n0, size_t row_bytes0, DType t1,
                               const GemvSegment* segs1, int n1, size_t row_bytes1, int k, const void* x,
                               const LaunchCtx& ctx);
// Expert mode (mixture of experts): one launch over the tiles {expert, first
// row, rows <= max_tile_rows <= 8} that moe_plan wrote (int4 each; *n_tiles
// of them, at most max_tiles): out[first + i, :] = x[first + i, :] . W_e^T
// for expert e's m rows (W_e = w + e * expert_bytes; with w_up, the GLU of
// gate and up as gemv_segments computes it). With x_one_row (tiles of one
// row: a single token) every tile reads x's first row instead, so the
// token's row needs no gather. x_rows: x's rows (the pairs).
void gemv_experts(DType w_type, const void* w, const void* w_up, bool gelu, size_t expert_bytes, size_t row_bytes,
                  int m, int k, const void* x, bool x_one_row, int x_rows, void* out, DType out_type,
                  const int32_t* tiles, const int32_t* n_tiles, int max_tiles, int max_tile_rows, const LaunchCtx& ctx);

// ---- gemm_mma.cu
// Tensor-core matmul for 1..64 activation rows straight from Q4_K or Q6_K
// weights (k % 256 == 0; NVIDIA only — supported() is false elsewhere).
// With splits > 1 the k range is split over blocks and `partials` must hold
// splits * n * m floats. mma_matmul_splits() picks the split count.
bool mma_matmul_supported(DType w_type, int k);
int mma_matmul_splits(int m, int k, int n_sms);
void mma_matmul(DType w_type, const void* w, size_t w_row_bytes, int m, int k, const void* x, int n, void* out,
                DType out_type, int splits, float* partials, const LaunchCtx& ctx);
// out = the sum of `splits` partials (each `count` floats), in split order.
void mma_sum_splits(const float* partials, int splits, int64_t count, void* out, DType out_type, const LaunchCtx& ctx);
// Expert mode: gemv_experts' contract with tiles of up to 64 rows, on
// tensor cores (mma_experts_supported: those of mma_matmul and f16).
bool mma_experts_supported(DType w_type, int k);
// tile_rows: the most rows a tile of the plan has (moe_plan's mma tiles).
void mma_matmul_experts(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int k, const void* x,
                        void* out, DType out_type, const int32_t* tiles, const int32_t* n_tiles, int max_tiles,
                        int tile_rows, const LaunchCtx& ctx);

// ---- gemm_wgmma.cu
// mma_matmul's contract on Hopper's asynchronous warpgroup tensor-core
// instructions (Q4_K, Q5_K and Q6_K with k % 256 == 0, the 32-wide block
// formats with k % 128 == 0: more than mma_matmul takes; supported() false elsewhere;
// the weights must lie in an allocation of whole 16-byte units).
// wgmma_matmul_splits() picks the split count for n activation rows,
// charging split_cost stage-times and the partials' bytes for splitting.
bool wgmma_matmul_supported(DType w_type, int k);
int wgmma_matmul_splits(DType w_type, int m, int k, int n, int n_sms, int split_cost);
void wgmma_matmul(DType w_type, const void* w, size_t w_row_bytes, int m, int k, const void* x, int n, void* out,
                  DType out_type, int splits, float* partials, const LaunchCtx& ctx);
// Launches of up to 16 rows (tiles of up to 16 in expert mode) take a
// 16-column variant where CudaOptions::wgmma_narrow.
// Expert mode: mma_matmul_experts' contract (tiles of up to 64 rows) on the
// same kernel; mma_matmul_experts hands its calls here where CudaOptions::wgmma
// is on and this kernel takes the format (Q5_K and the 32-wide formats only
// here).
bool wgmma_experts_supported(DType w_type, int k);
void wgmma_matmul_experts(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int k,
                          const void* x, void* out, DType out_type, const int32_t* tiles, const int32_t* n_tiles,
                          int max_tiles, int tile_rows, const LaunchCtx& ctx);

// ---- dequant.cu
// dst[r, :] = dequant(w[r, :]) as f16, for rows [row0, row0 + rows).
void dequant_rows_f16(DType w_type, const void* w, size_t w_row_bytes, int row0, int rows, int k, void* dst,
                      const LaunchCtx& ctx);

// ---- matmul_fp8.cu
// xq[r, :] = e4m3 codes of x[r, :] / scale[r] (x f16 [n, k]), scale[r] =
// max|x[r, :]| / 448 (core/fp8.h).
void quantize_act_e4m3(const void* x, int n, int k, void* xq, float* scale, const LaunchCtx& ctx);
// out[r] = the scale in the header of FP8 weight row r (F8_E4M3_ROW).
void gather_f8_row_scales(const void* w, size_t row_bytes, int m, float* out, const LaunchCtx& ctx);

// ---- gemm_tiled.cu
// Tiled f16 GEMM (f32 accumulation), out[n, m] = x[n, k] . w[m, k]^T, with
// out row stride ldo; the BLAS fallback where no vendor BLAS exists.
void gemm_f16_tiled(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo,
                    const LaunchCtx& ctx);

// ---- norm.cu
// out = x / rms(x) * w per row; x and out f16 or f32.
void rms_norm(const void* x, DType in_type, const float* w, void* out, DType out_type, int rows, int cols, float eps,
              const LaunchCtx& ctx);
// Two f16 RMSNorms of rows of width cols in one launch (q and k head norms).
void rms_norm_pair_f16(const void* a, const float* wa, void* a_out, int rows_a, const void* b, const float* wb,
                       void* b_out, int rows_b, int cols, float eps, const LaunchCtx& ctx);
// x (f32) += y (f16; with wy, rms_norm(y) * wy rounded to f16), then
// out = rms_norm(x) * w (f16 or f32), per row.
void add_rms_norm(float* x, const void* y, const float* wy, const float* w, void* out, DType out_type, int rows,
                  int cols, float eps, const LaunchCtx& ctx);

// ---- elementwise.cu
// out[t, :] = table[ids[t], :] as f32 (any weight format).
void embed_rows(DType type, const void* table, size_t row_bytes, int cols, const int32_t* ids, int n, int vocab,
                float* out, const LaunchCtx& ctx);
// The same from the rows of ids [first, first + vocab); with zero_outside,
// other ids give zero rows (a tensor-parallel rank's vocabulary range).
void embed_rows_range(DType type, const void* table, size_t row_bytes, int cols, const int32_t* ids, int n, int first,
                      int vocab, bool zero_outside, float* out, const LaunchCtx& ctx);
// out = silu(gate) * up (f16, n elements).
void swiglu(const void* gate, const void* up, void* out, int64_t n, const LaunchCtx& ctx);
// out = gelu_tanh(gate) * up (f16, n elements), the GELU rounded to f16 as
// ggml's table does (Backend::geglu).
void geglu(const void* gate, const void* up, void* out, int64_t n, const LaunchCtx& ctx);
// out[t, i] = act(gate_up[t, i]) * gate_up[t, ff + i] (f16; rows of 2 ff:
// gate's columns, then up's), act as swiglu (SiLU) or geglu (GELU).
void glu_packed(const void* gate_up, int64_t rows, int ff, void* out, bool gelu, const LaunchCtx& ctx);
// x[r, :] += bias for the rows of x (f16 [rows, cols]); bias f32 [cols].
void add_bias_f16(void* x, const float* bias, int64_t rows, int cols, const LaunchCtx& ctx);
// Splits the columns of src (f16 [rows, width]) into segments, in order:
// dst[s] (f16 [rows, cols[s]]) = src's next cols[s] columns + bias[s] (f32
// [cols[s]], or null). Widths are multiples of 8 and sum to width.
struct ColumnSegments {
  static constexpr int kMax = 3;
  void* dst[kMax] = {};
  const float* bias[kMax] = {};
  int cols[kMax] = {};
  int count = 0;
};
void split_columns_f16(const void* src, int rows, int width, const ColumnSegments& segs, const LaunchCtx& ctx);
// x *= s (f32, n elements).
void scale_f32(float* x, float s, int64_t n, const LaunchCtx& ctx);
// x = cap * tanh(x / cap) (f32, n elements).
void softcap_f32(float* x, float cap, int64_t n, const LaunchCtx& ctx);
// x (f32) += y (f16), n elements.
void add_f16_to_f32(float* x, const void* y, int64_t n, const LaunchCtx& ctx);
// out[i, :] = x[rows[i], :] for rows of `row_words` 4-byte words (f32, or
// f16 rows of even length).
void gather_rows(const void* x, const int32_t* rows, int n_rows, int row_words, void* out, const LaunchCtx& ctx);
// Converts n f32 values to f16.
void f32_to_f16(const float* x, void* out, int64_t n, const LaunchCtx& ctx);

// ---- rope_kv.cu
// RoPE on q and k (f16, in place) and K/V store into the f16 paged cache.
void rope_store_kv(void* q, void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads, const RopeParams& rope,
                   const KVLayer& cache, const LaunchCtx& ctx);
// The same after per-head RMSNorms of q_raw and k_raw (weights wq, wk) into
// q and k (Backend::qk_norm_rope_store_kv); f16 cache, heads whose half is
// a whole number of warps and at most 128 (qk_norm_rope_fusable).
bool qk_norm_rope_fusable(int head_dim, int warp_size);
void qk_norm_rope_store_kv(const void* q_raw, const float* wq, const void* k_raw, const float* wk, float eps, void* q,
                           void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads,
                           const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx);

// ---- attention.cu (attention_prefill.cu, attention_decode.cu)
// Paged attention; partial buffers hold split-K results.
struct AttentionScratch {
  float* partial_out = nullptr;  // [max_tokens, n_heads, max_splits, head_dim]
  float* partial_ml = nullptr;   // [max_tokens, n_heads, max_splits, 2]
  int max_splits = 1;
  int max_tokens = 0;
  // Prefill tiles split over their keys (QueryTile::partial): per slot
  // [kQueryTileTokens, n_heads, head_dim] unnormalized outputs and
  // [kQueryTileTokens, n_heads, 2] (max, sum) statistics.
  float* tile_out = nullptr;
  float* tile_ml = nullptr;
  int max_tile_partials = 0;
};
// How the prefill attention kernel that runs for a head size under these
// options (tensor cores, else CUDA cores, else none) takes its query tiles:
// keys per key tile (0: no tile kernel runs) and query heads per block for
// a GQA group; attention() launches by it. prefill_blocks_per_sm: how many
// of its blocks an SM holds at once (an occupancy query; the backend plans
// a step's tiles with both, query_tiles.h).
struct PrefillTiling {
  bool tensor_cores = false;
  int key_tile = 0;
  int heads_per_block = 1;
};
PrefillTiling prefill_tiling(const CudaOptions& options, int head_dim, int group);
int prefill_blocks_per_sm(const PrefillTiling& tiling, int head_dim);
void attention(const void* q, const KVLayer& cache, const StepMeta& m, int n_tokens, const AttentionParams& p,
               int n_splits, const AttentionScratch& scratch, void* out, const LaunchCtx& ctx);
// Whether the decode kernel's n_splits splits are summed by a cluster of
// their blocks (CudaOptions::attention_cluster; CUDA) instead of the
// combine kernel: clusters of at most kMaxDecodeCluster blocks (past the
// portable 8: an opt-in of the kernels).
constexpr int kMaxDecodeCluster = 16;
// The most slices so summed for a head size (attention_cluster, or
// attention_cluster_hd256 at 256); 0: none.
int decode_cluster_limit(const CudaOptions& options, int head_dim);
bool decode_cluster_sums(const LaunchCtx& ctx, int n_splits, int head_dim);

// ---- moe.cu
constexpr int kMoeMaxExperts = 256;
// Routing: f32 router logits [n, n_expert] -> the k chosen experts of each
// token (ids [n, k], largest logit first, ties to the lower index) and
// their softmax probabilities (weights [n, k], renormalised when norm).
// With `plan` (one token only) the same launch also writes moe_plan's output
// for these ids (each chosen expert its own one-row tile), so the FFN needs
// no plan launch.
struct MoePlanOut {
  int32_t *order, *pos_of, *tiles_a, *tiles_b, *n_tiles;
};
void moe_route(const float* logits, int n, int n_expert, int k, bool norm, int32_t* ids, float* weights,
               const MoePlanOut* plan, const LaunchCtx& ctx);
// One token's router logits (x f16 [d] . w f32 [n_expert, d]^T into
// logits) and their routing as moe_route with the plan, in one launch;
// `ticket` (one zeroed unsigned, left zeroed) finds the block that routes.
bool moe_router_route_fusable(int d, int n_expert, int k);
void moe_router_route(const void* x, const float* w, int d, int n_expert, int k, bool norm, float* logits, int32_t* ids,
                      float* weights, const MoePlanOut& plan, unsigned* ticket, const LaunchCtx& ctx);
// Groups the n_pairs = n * k (token, expert) pairs of ids by expert:
// order[pos] = pair, pos_of[pair] = pos, and tiles (int4 {expert, first
// pos, rows, 0}) of at most tile_a rows into tiles_a and tile_b rows into
// tiles_b; n_tiles[0], n_tiles[1] their counts (each at most
// moe_max_tiles).
void moe_plan(const int32_t* ids, int n_pairs, int n_expert, int tile_a, int tile_b, int32_t* order, int32_t* pos_of,
              int32_t* tiles_a, int32_t* tiles_b, int32_t* n_tiles, const LaunchCtx& ctx);
int moe_max_tiles(int n_pairs, int n_expert, int tile_rows);
// xs[pos, :] = x[order[pos] / k, :] (f16 rows of cols).
void moe_gather(const void* x, const int32_t* order, int n_pairs, int k, int cols, void* xs, const LaunchCtx& ctx);
// out[t, :] = sum_j weights[t, j] * y[pos_of[t * k + j], :] (y f32, out f16).
void moe_combine(const float* y, const int32_t* pos_of, const float* weights, int n, int k, int cols, void* out,
                 const LaunchCtx& ctx);

// ---- moe_down.cu
// One token's expert down projections and their weighted sum in one launch
// (CudaOptions::fused_moe_down): out[r] = sum_j weights[j] * (row r of
// expert ids[j]'s m x ff down matrix at w + ids[j] * expert_bytes) .
// h[pos_of[j], :] for r < m (out f16), h's k_used rows of ff (f16) read as
// 8-bit quants (written into ctx.act_q8 first). ids, weights and pos_of
// must come from the host or from a kernel before the one writing h (the
// kernel reads them before waiting for its predecessors: they are done two
// launches back). Supported: Q4_K or Q6_K, ff % 256 == 0; false if it did
// not launch (the caller runs the down GEMV and moe_combine).
bool moe_down_combined_supported(const CudaOptions& options, DType w_type, int ff, int k_used);
bool moe_down_combined(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int ff, int k_used,
                       const void* h, const int32_t* ids, const float* weights, const int32_t* pos_of, void* out,
                       const LaunchCtx& ctx);

// ---- sample.cu
// Sampling: one block per row over f32 logits [rows, vocab].
struct SampleRowDevice {
  float temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  int32_t top_k, top_logprobs, penalty_offset, penalty_count;
  int32_t mask_offset;  // into the step's mask words, -1: no mask
  uint64_t seed, counter;
};
struct SampleOutDevice {
  int32_t token;
  float logprob;
  int32_t top_ids[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};
// `masks`: the rows' allowed-token bitmasks (SampleRow::allowed), at
// params[row].mask_offset words.
void sample(const float* logits, int rows, int vocab, const SampleRowDevice* params, const PenaltyToken* penalties,
            const uint32_t* masks, float* work, SampleOutDevice* out, const LaunchCtx& ctx);
// Plain greedy rows (sample_common.cuh): each row's ChunkStats of its n
// logits (token ids first..first+n) into the start of its slice of work.
void greedy_chunks(const float* logits, int rows, int n, int first, const SampleRowDevice* params,
                   const uint32_t* masks, float* work, const LaunchCtx& ctx);

// ---- sample_shard.cu
// The per-rank primitives of vocabulary-parallel sampling
// (backend/vocab_parallel_sample.h) over a rank's logits [rows, local] of
// ids [first, first + local): one block per row. Masses are 32.32 fixed
// point summed as integers (results do not depend on thread timing),
// reported as doubles in units of exp(x - top).
struct ShardRowDevice {  // a row's inputs to the later primitives
  uint32_t floor, prefix;
  float top;
  double before, u;
  int32_t want, owner;
};
struct ShardPickDevice {
  float raw;   // the raw logit of id
  int32_t id;  // global id; -1: none
};
struct ShardPrepDevice {
  double raw_sum;  // sum of exp(raw - raw_max)
  float raw_max, top, best_v, best_raw;
  int32_t best_i;  // global id
  float top_v[kMaxTopLogprobs];
  int32_t top_i[kMaxTopLogprobs];  // global ids; -1: none
};
// The buffers of one step for up to `rows` rows, carved from one allocation
// (device, and pinned host with the same layout): byte offsets.
struct ShardLayout {
  size_t rows_in = 0, prep = 0, hist = 0, vals = 0, picks = 0, bytes = 0;
  explicit ShardLayout(size_t rows) {
    auto take = [&](size_t n) {
      const size_t at = bytes;
      bytes += (n + 255) / 256 * 256;
      return at;
    };
    rows_in = take(rows * sizeof(ShardRowDevice));
    prep = take(rows * sizeof(ShardPrepDevice));
    hist = take(rows * 256 * sizeof(double));
    vals = take(rows * sizeof(double));
    picks = take(rows * 2 * sizeof(ShardPickDevice));
  }
};
// Adjusts each row into work (biases, penalties, bans, mask, temperature)
// and summarizes it (ShardPrepDevice: maxima, the raw sum of exponentials,
// the best token and its raw logit, the top raw logits).
void shard_prepare(const float* logits, int rows, int local, int first, const SampleRowDevice* params,
                   const PenaltyToken* penalties, const uint32_t* masks, float* work, ShardPrepDevice* out,
                   const LaunchCtx& ctx);
// hist[r, 256] for rows with in[r].want: the weight (count, or by_mass the
// mass) of work values with key >= floor and (key & mask) == prefix, by
// (key >> shift) & 255.
void shard_histogram(const float* work, int rows, int local, const ShardRowDevice* in, uint32_t mask, int shift,
                     bool by_mass, double* hist, const LaunchCtx& ctx);
// out[r] = the kept mass (key >= floor) of rows with in[r].want.
void shard_kept_mass(const float* work, int rows, int local, const ShardRowDevice* in, double* out,
                     const LaunchCtx& ctx);
// picks[2r] = where in[r].owner, the first kept id at which before + the
// kept mass so far exceeds u (else the last kept; -1 when not the owner);
// picks[2r + 1] = the last kept id (-1: none). Global ids, with their raw
// logits.
void shard_pick(const float* logits, const float* work, int rows, int local, int first, const ShardRowDevice* in,
                ShardPickDevice* picks, const LaunchCtx& ctx);

// ---- peer_all_reduce.cu
// In-place sums over tensor-parallel ranks through peer memory, one kernel
// per call (backend/cuda/peer_all_reduce.h owns the memory). Every call of
// every rank launches kPeerBlocks blocks. NVIDIA only: supported() is false
// in portable builds.
constexpr int kPeerMaxRanks = 8, kPeerBlocks = 32, kPeerThreads = 512;
struct PeerReduceArgs {
  void* inbox[kPeerMaxRanks];      // each rank's inbox: 3 buffers x n_ranks slots of slot_bytes
  uint32_t* buffers;               // this rank's last inbox buffer (0..2), per block
  const volatile uint32_t* abort;  // set (host memory) when another rank failed
  size_t slot_bytes;
  int rank, n_ranks;
};
// The word an empty inbox holds.
constexpr uint32_t kPeerInboxSentinel = 0x80008000u;
bool peer_all_reduce_supported();
// x (f16 or f32; bytes a multiple of 16, <= slot_bytes) = the sum over ranks.
void peer_all_reduce(const PeerReduceArgs& args, DType type, void* x, size_t bytes, const LaunchCtx& ctx);
// add_rms_norm (norm.cu) of x with the sum over ranks of partial (f16
// [rows, cols], cols % 8 == 0 and <= kPeerFusedMaxCols, <= slot_bytes): x
// (f32) += that sum (RMS-normed with wy first, if not null); out =
// RMSNorm(x) * w (f16 or f32). partial is left as it was.
constexpr int kPeerFusedMaxCols = 8 * kPeerThreads * 2;
void peer_all_reduce_add_rms_norm(const PeerReduceArgs& args, const void* partial, float* x, const float* wy,
                                  const float* w, void* out, DType out_type, int rows, int cols, float eps,
                                  const LaunchCtx& ctx);

}  // namespace rf::gpu
