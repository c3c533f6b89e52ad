// CudaOptions: every setting of the CUDA backend in one struct — what the
// caller chooses (device, scratch sizes, graphs) and the measurement
// switches from the environment. The environment is read once, by
// CudaOptions::from_env() when the backend is constructed; launchers get the
// options through their LaunchCtx (gpu.h), and nothing else reads getenv.
//
// Environment switches (docs/GPU.md lists them too). A switch is on unless
// its variable is exactly "0":
//   ROCMFORGE_PDL=0          plain launches instead of programmatic dependent
//                            launches                               (pdl)
//   ROCMFORGE_TMA_GEMV=0     GEMVs do not bulk-copy weight rows into shared
//                            memory with the copy engine            (tma_gemv)
//   ROCMFORGE_L2_PREFETCH=0  k-quant GEMVs do not prefetch their rows into
//                            L2                                     (l2_prefetch)
//   ROCMFORGE_GEMV_ROW_SETS=0 one-row k-quant GEMVs on short rows (k <= 2048)
//                            do not split a block's warps between row sets
//                                                           (gemv_row_sets)
//   ROCMFORGE_MMA=0          k-quant / Q8_0 batches of 9..256 rows take
//                            dequantize + BLAS instead of the tensor-core
//                            matmul                          (mma_max_rows_quant = 0)
//   ROCMFORGE_WGMMA=0        that matmul on the mma.sync kernel, not
//                            Hopper's wgmma kernel                (wgmma)
//   ROCMFORGE_WGMMA_NARROW=0 launches of <= 16 rows (expert tiles of 16)
//                            on the wgmma kernel's 64-column variant
//                                                        (wgmma_narrow)
//   ROCMFORGE_WGMMA_SPLIT_COST=N the wgmma kernel's k range split where it
//                            saves more than N stage-times
//                                                     (wgmma_split_cost)
//   ROCMFORGE_MOE_MMA_ROWS=N mixture-of-experts FFNs use the tensor-core
//                            kernel once the experts average more than N
//                            rows, N >= 0                  (moe_mma_rows)
//   ROCMFORGE_PEER_ALL_REDUCE=0 tensor-parallel all-reduces all go through
//                            NCCL, none through the one-shot peer-memory
//                            kernel                         (peer_all_reduce)
//   ROCMFORGE_PEER_FUSED_NORM=0 the peer-memory all-reduce at the end of a
//                            layer block does not also add the residual and
//                            apply the next RMSNorm       (peer_fused_norm)
//   ROCMFORGE_PEER_EARLY_TRIGGER=0 the peer-memory kernels start the next
//                            kernel after their exchange, not as they begin
//                                                   (peer_early_trigger)
//   ROCMFORGE_GEMV_TMA_ROWS=1|2|4 rows per bulk-copying GEMV block (f16
//                            and FP8), halved where they do not fit
//                                                        (gemv_tma_rows)
//   ROCMFORGE_KQ_STREAM_ROWS=N rows per warp of the streaming k-quant GEMV
//                            (1, 2 or 4); 0: the shared-memory k-quant
//                            GEMV instead                (kq_stream_rows)
//   ROCMFORGE_KQ_STREAM_Q6K_ROWS=N the same for Q6_K (1, 2 or 4; 0: the
//                            shared-memory kernel)   (kq_stream_q6k_rows)
//   ROCMFORGE_KQ_STREAM_L1=0 that GEMV's Q4_K weight loads bypass L1
//                                                         (kq_stream_l1)
//   ROCMFORGE_BLOCK32_STREAM=0 batch-1 GEMVs of the 32-wide block formats
//                            on gemv.cu's kernel (f16 activations), not
//                            the streaming one          (block32_stream)
//   ROCMFORGE_FUSED_Q8=0     that GEMV quantizes its activations itself,
//                            not the RMSNorm / attention combine before it
//                                                         (fused_act_q8)
//   ROCMFORGE_FUSED_QK_ROPE=0 per-head q/k norms in their own kernel, not
//                            inside the RoPE + KV store (fused_qk_norm_rope)
//   ROCMFORGE_FUSED_MOE_ROUTER=0 one token's router GEMV and routing in
//                            two launches             (fused_moe_router)
//   ROCMFORGE_KQ_STREAM_EXPERT_ROWS=0 one token's expert down GEMVs on
//                            the shared-memory kernel (kq_stream_expert_rows)
//   ROCMFORGE_KQ_STREAM_SHORT_ROWS=0 ... but not short expert rows (the
//                            warp in lane groups) (kq_stream_short_expert_rows)
//   ROCMFORGE_FUSED_MOE_DOWN=0 one token's expert down GEMVs and their
//                            weighted sum in two launches, not one
//                                                        (fused_moe_down)
//   ROCMFORGE_GEMV_TWO_FORMATS=0 one row's q/k/v of two k-quant formats
//                            in two GEMV launches, not one
//                                                      (gemv_two_formats)
//   ROCMFORGE_PACKED_GATE_UP=0 batches of 9..256 rows multiply gate and up
//                            weights in two matmuls, not one over both
//                                                        (packed_gate_up)
//   ROCMFORGE_FOLD_NORM_GAINS=0 norm gains stay out of the f16 weights, and
//                            one token's residual add + RMSNorm runs as its
//                            own launch                (fold_norm_gains)
//   ROCMFORGE_KQ_STREAM_GROUPS=0 rows whose chunks fill a warp's lanes
//                            unevenly (3072 wide) take the whole warp,
//                            not lane groups of 16 (kq_stream_lane_groups)
//   ROCMFORGE_KQ_STREAM_EARLY_TWO=0 streaming GEMV lanes of rows that fill
//                            a warp unevenly load one chunk before the PDL
//                            wait, not two           (kq_stream_early_two)
//   ROCMFORGE_KQ_STREAM_UNEVEN_ONE_ROW=0 Q4_K / Q5_K rows of 48-63 chunks
//                            two a warp (3072 wide: lane groups of 16), not
//                            one a whole warp   (kq_stream_uneven_one_row)
//   ROCMFORGE_PDL_EARLY_ROPE=0 RoPE + KV store triggers the attention's
//                            launch after its own wait  (pdl_early_rope)
//   ROCMFORGE_KQ_STREAM_EXPERT_GROUPS=0 one token's expert rows of one
//                            chunk a lane take whole warps, not lane
//                            groups of 16        (kq_stream_expert_groups)
//   ROCMFORGE_KQ_STREAM_SPLIT=N warps per set of rows of that GEMV (1, 2, 4)
//                            instead of the rule by row length
//                                                         (kq_stream_split)
//   ROCMFORGE_ATTN_BLOCKS=N  decode-attention block target, N > 0
//                                                    (attention_target_blocks)
//   ROCMFORGE_ATTN_CLUSTER=N decode attention in at most N key slices
//                            (2..16) summed by a cluster of their blocks;
//                            0: up to max_attention_splits slices and the
//                            combine kernel              (attention_cluster)
//   ROCMFORGE_ATTN_CLUSTER_HD256=N the same for head size 256 (2..16)
//                                                (attention_cluster_hd256)
//   ROCMFORGE_ATTN_MIN_SPLIT=N decode-attention key slices of at least N
//                            keys, N > 0           (attention_min_split_keys)
//   ROCMFORGE_FP8_GEMM_ROWS=N FP8 weights: batches of >= N rows (default
//                            9) run e4m3 x e4m3 on tensor cores
//                            (cuBLASLt); 0: f16 activations always
//                                                    (fp8_gemm_min_rows)
//   ROCMFORGE_PREFILL_MMA=0  prefill attention on CUDA cores instead of
//                            tensor cores                  (prefill_mma)
//   ROCMFORGE_PREFILL_SPLIT=N at most N parts of split prefill query tiles
//                            a step; 0: tiles never split
//                                                  (prefill_tile_partials)
//   ROCMFORGE_PACKED_QKV=0   q, k and v weights loaded apart, three
//                            matmuls per batch              (packed_qkv)
//   ROCMFORGE_PROFILE=1      time every op with events and print the table
//                            at exit; graphs are off    (profile: any value
//                            but empty or "0")
// A switch set to "0" turns its field off whatever the caller chose;
// ROCMFORGE_ATTN_BLOCKS, ROCMFORGE_ATTN_CLUSTER(_HD256), ROCMFORGE_FP8_GEMM_ROWS,
// ROCMFORGE_WGMMA, ROCMFORGE_WGMMA_SPLIT_COST,
// ROCMFORGE_PREFILL_MMA, ROCMFORGE_PACKED_QKV,
// ROCMFORGE_GEMV_TMA_ROWS,
// ROCMFORGE_KQ_STREAM_ROWS,
// ROCMFORGE_KQ_STREAM_Q6K_ROWS, ROCMFORGE_KQ_STREAM_SPLIT,
// and ROCMFORGE_PROFILE override the caller's
// value.
// The backend applies from_env() to the options it is given, once, in its
// constructor (so every CudaBackend follows the environment).
#pragma once

#include <cstddef>

namespace rf {

struct CudaOptions {
  int device = 0;
  size_t dequant_scratch_bytes = size_t(256) << 20;  // cap for quantized large-batch matmuls
  int max_attention_splits = 32;
  // Decode attention: tokens x KV heads x key slices to aim for; 0: two per
  // SM. Measured on the H200: one slice for 64 sequences x 8 KV heads beat
  // four by 5% on 64-sequence decode.
  int attention_target_blocks = 0;
  // ... and each slice at least this many keys of the step's longest
  // context (the slices past it stay empty and weigh nothing).
  int attention_min_split_keys = 32;
  // Decode attention's key slices at most this many (2..16), the slices
  // of one (token, KV head) one thread-block cluster that sums them through
  // distributed shared memory (CUDA; attention_decode.cu), where a combine
  // kernel launch followed; 0: the slices up to max_attention_splits and
  // the combine kernel.
  int attention_cluster = 8;
  // The same for head size 256 (Gemma 2 and 3), whose blocks score and
  // sum twice the dims a key: more, shorter slices (H100, tg128 b1 q4_k_m
  // gemma2-9b at 8 -> 16: 273.0 / 273.1 -> 278.0 / 278.8 tok/s, where
  // llama3-8b and qwen3-30b-a3b measured slower at 16). Used only while
  // attention_cluster is on.
  int attention_cluster_hd256 = 16;
  bool graphs = true;
  // Batches of 9..N rows on Q4_K / Q6_K (Hopper: also Q5_K, Q8_0) weights
  // use the tensor-core matmul reading the stored format (0: dequantize +
  // BLAS instead).
  int mma_max_rows_quant = 256;
  // ... on Hopper, the wgmma kernel (gemm_wgmma.cu) where it takes the
  // format (off: the mma.sync kernel of gemm_mma.cu), its k range split
  // where that saves more than this many stage-times (wgmma_matmul_splits).
  bool wgmma = true;
  int wgmma_split_cost = 2;
  // ... its 16-column variant for launches of up to 16 rows (and MoE expert
  // tiles of 16 rows where the active experts average at most 8).
  bool wgmma_narrow = true;
  // MoE FFNs: the tensor-core kernel in expert mode once the step's
  // (token, expert) pairs average more than this many per active expert;
  // fewer go through the GEMV kernels. Measured on the H100 (qwen3-30b-a3b
  // shape, 4 layers, q4_k_m): 8 sequences 2,372 tok/s with 8, 2,704 with 0;
  // 64 sequences 6,402 with 8, 10,856 with 0.
  int moe_mma_rows = 0;
  // Every kernel is a programmatic dependent launch (gpu.h, launch()).
  bool pdl = true;
  // Batch-1 GEMVs bulk-copy weight rows into shared memory (sm_90 TMA).
  bool tma_gemv = true;
  // k-quant GEMVs prefetch their weight rows into L2.
  bool l2_prefetch = true;
  // One-row k-quant GEMVs on rows of <= 64 sub-blocks give each warp pair
  // (or warp) its own rows, so most lanes have a sub-block.
  bool gemv_row_sets = true;
  // Tensor parallelism: all-reduces of up to 1 MB (decode steps) use the
  // one-shot peer-memory kernel (peer_all_reduce.h) where every GPU pair
  // has peer access; larger ones, and every one when off, go through NCCL.
  bool peer_all_reduce = true;
  // ... and the one ending a layer block also adds the residual and applies
  // the next RMSNorm in the same kernel. Measured on two H100s (llama3-8b
  // f16 batch-1 decode at TP=2, flag exchange): 250.9 tok/s fused, 247.4
  // as two kernels.
  bool peer_fused_norm = true;
  // The peer-memory kernels let the next kernel start (programmatic
  // dependent launch) as they begin, so its weight prefetch overlaps the
  // exchange. Measured as above (fused): 259.0 tok/s early, 250.9 late with
  // the flag exchange; 265.5 and 261.8 with the Lamport exchange.
  bool peer_early_trigger = true;
  // Bulk-copying GEMVs' rows per block (1, 2 or 4; halved where the rows
  // and up rows exceed 64 KB); 0: one for f16 (two for the o projection
  // fused with the residual add: gemv.cu), two for FP8 (llama3-8b:fp8
  // tg128 b1, H100: 274.7 / 276.3 tok/s at one, 281.8 / 280.7 at two). One
  // measured best for f16 on the H100 (tg128 b1,
  // against the rule before: 4 rows for rows of >= 8 KB in grids of >= 2048
  // blocks, else 2, rows wider than 2 per block to the plain GEMV), two
  // rounds alternated: qwen2.5-7b 179.5 / 178.8 -> 188.9 / 188.5 tok/s (its
  // 18,944-wide down rows now bulk-copied), qwen3-8b 170.2 / 168.9 ->
  // 173.0 / 172.8, gemma2-9b 138.8 / 139.1 -> 140.8 / 141.6, phi3-mini
  // 314.8 / 312.3 -> 316.3 / 317.6, llama3-8b 176.0 / 176.7 -> 176.6 /
  // 177.3.
  int gemv_tma_rows = 0;
  // Batch-1 Q4_K (and Q6_K) GEMVs stream their weights through registers against 8-bit
  // activations (gemv_stream.cu), this many rows per warp (1, 2 or 4); 0:
  // the k-quant GEMV of gemv.cu (f16 activations). Measured on the H100,
  // llama3-8b q4_k_m tg128 batch 1: 0: 295.2, 1: 330.2, 2: 336.6, 4: 315.5
  // tok/s (with f16 activations the streaming kernel was slower: 240-290).
  // Q5_K streams (two rows per warp) wherever Q4_K does.
  int kq_stream_rows = 2;
  // ... and this many warps share a set of rows (1, 2 or 4), splitting its
  // width; 0: by the row length (gemv_stream.cu's stream_split).
  int kq_stream_split = 0;
  // ... and for Q6_K, this many rows per warp (1, 2 or 4; 0: the kernel of
  // gemv.cu). Measured as above: 0: 339.0, 1: 353.1, 2: 355.8 tok/s.
  int kq_stream_q6k_rows = 2;
  // ... and the 32-wide block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
  // stream (two rows per warp, rows of whole 64-weight chunks) wherever
  // Q4_K does.
  bool block32_stream = true;
  // ... Q4_K weight loads through L1 (Q6_K's always). Measured on the H200
  // (llama3-8b q4_k_m tg128 b1): 360.5 past L1, 365.4 through it.
  bool kq_stream_l1 = true;
  // ... and the row's 8-bit quants are written by the kernel that produces
  // the row where it can (the residual add + RMSNorm, the attention
  // combine: one row, f16), so the GEMV right after skips its quantize
  // launch (LaunchCtx::act_q8_state); a second GEMV of the same row in the
  // next op reuses them too. Only with Q4_K / Q6_K weights loaded. Measured
  // on the H100 (tg128 b1, two rounds, off -> on): llama3-8b q4_k_m
  // 358.6 / 358.4 -> 373.7 / 373.6 tok/s, qwen3-30b-a3b q4_k_m 325.4 / 324.0
  // -> 335.5 / 335.0; batch-1 perplexity bit-identical (KL divergence 0).
  bool fused_act_q8 = true;
  // Per-head q/k RMSNorms fused into the RoPE + KV store kernel (Qwen3,
  // Gemma 3; f16 cache): one launch instead of two per layer.
  bool fused_qk_norm_rope = true;
  // One token's MoE router GEMV (f32 weights) and its routing in one launch
  // (the last block to finish routes); the expert gate*up then reads the
  // norm's 8-bit quants.
  bool fused_moe_router = true;
  // One token's expert GEMVs whose tiles read rows of their own (the down
  // projections: each expert's GLU output) also take the streaming k-quant
  // GEMV, all the rows quantized in one launch (wide expert rows: Mixtral's
  // 14336). The three measured on the H100 (tg128 b1 q4_k_m, two rounds,
  // all off -> all on): qwen3-8b 337.7 / 341.2 -> 347.0 / 346.6 tok/s,
  // qwen3-30b-a3b 333.3 / 330.3 -> 340.4 / 341.9, mixtral-8x7b-4l
  // 1301.7 / 1301.1 -> 1340.3 / 1358.9 (llama3-8b, none applying: 369.9 /
  // 371.4 -> 369.9 / 371.9).
  bool kq_stream_expert_rows = true;
  // ... also rows of fewer 64-weight chunks than a warp has lanes (Qwen3-
  // MoE's 768-wide down rows, which otherwise take gemv.cu's kernel with
  // f16 activations), the warp's lanes in groups of 8 or 16 per set of
  // rows. Measured on the H100 (tg128 b1 after 64 prompt tokens, two
  // rounds, off -> on): qwen3-30b-a3b q4_k_m 346.5 / 346.1 -> 364.6 /
  // 364.5 tok/s; batch-1 KL divergence against off 0.0011 (8-bit GLU
  // outputs; dummy weights).
  bool kq_stream_short_expert_rows = true;
  // One token's expert down projections and their weighted sum in one
  // streaming launch (moe_down.cu: output row r joins the chosen experts'
  // rows r, each part scaled by its routing weight), where the down GEMV
  // wrote each expert's output and a combine kernel summed them. Measured
  // on the H100 (tg128 b1 after 64 prompt tokens, two rounds, off -> on):
  // qwen3-30b-a3b q4_k_m 384.5 / 386.9 -> 399.8 / 401.8 tok/s,
  // mixtral-8x7b-4l 1,587.5 / 1,594.4 -> 1,608.8 / 1,604.1.
  bool fused_moe_down = true;
  // ... and, two rows per warp, rows of 33..63 chunks that 16 lanes divide
  // evenly (Phi-3's 3072-wide rows: 48 chunks, where a whole warp leaves
  // half its lanes one chunk short) in lane groups of 16, each its own set
  // of rows. Measured on the H100 (tg128 b1 after 64 prompt tokens, two
  // rounds, off -> on): phi3-mini q4_k_m 553.6 / 554.0 -> 560.8 / 560.8
  // tok/s. (Groups of 8 for Gemma 2's 3584-wide rows: 275.6 / 274.8 ->
  // 257.0 / 256.9; not taken.)
  bool kq_stream_lane_groups = true;
  // ... and expert tiles of rows one chunk a lane (Qwen3-MoE's 2,048-wide
  // expert gate and up rows: 1,536 blocks of one round trip each, ~3.9
  // waves at 3 blocks an SM) in lane groups of 16: two chunks a lane, half
  // the blocks. H100 qwen3-30b-a3b q4_k_m b1, whole warps beside it:
  // 415.8 / 419.7 -> 423.6 / 424.8 tok/s; the gate*up alone 10.9 -> 10.2
  // us. (Groups of 8, four chunks a lane and one wave: 412.2 / 412.3.)
  bool kq_stream_expert_groups = true;
  // The RoPE + KV store kernel (f16 cache) triggers the attention's launch
  // before its own PDL wait (pdl_wait_trigger), so the attention starts
  // copying older K/V, and the GEMV after it launches, earlier. H100, off
  // -> on, two rounds: tg128 b1 llama3-8b f16 178.1 / 177.6 -> 178.5 /
  // 178.9 tok/s, phi3-mini f16 313.7 / 314.1 -> 317.5 / 315.3, gemma2-9b
  // f16 133.6 / 134.7 -> 134.3 / 134.3, llama3-8b q4_k_m 387.2 / 382.8 ->
  // 389.4 / 389.6 (another call: 390.4 / 393.3 -> 388.4 / 392.4); llama3-8b
  // f16 64 sequences 7,491 / 7,502 -> 7,559 / 7,588. Not other short
  // kernels: the add + RMSNorm (phi3-mini f16 -0.9%; with 8-bit outputs
  // llama3-8b q4_k_m -2.7%), the 8-bit quantize (-1.6%).
  bool pdl_early_rope = true;
  // The streaming GEMV's lanes load their first two chunks before the PDL
  // wait, not one, where a row's chunks do not fill a warp's lanes evenly
  // (3584 wide: 56 chunks; two-row launches of one warp a row set, Q4_K and
  // Q6_K). H100 tg128 b1 q4_k_m, off -> on, two rounds: gemma2-9b 269.6 /
  // 270.3 -> 275.1 / 274.0 tok/s, qwen2.5-7b 397.2 / 396.8 -> 404.0 /
  // 405.3. For every row (llama3-8b's 4096-wide too): llama3-8b 388.9 /
  // 388.1 -> 382.7 / 385.0, phi3-mini -0.5%; not taken.
  bool kq_stream_early_two = true;
  // Q4_K and Q5_K rows of fewer than two chunks a lane that fill a warp's
  // lanes unevenly (3072 wide: 48 chunks, which took lane groups of 16,
  // three chunks a lane, one before the PDL wait; 3584 and 3840 wide: 56
  // and 60, two rows a warp) streamed one row a warp by the whole warp, a
  // lane's one or two chunks loaded before the wait. Alone each GEMV is as
  // fast either way (Nsight Compute: Phi-3's gate*up 15.7 us both), but in
  // the graph more blocks start sooner. H100, tg128 b1, alternated, tok/s:
  // 3072 wide, Q4_K only, two calls of two rounds, phi3-mini q4_k_m 544.7
  // / 553.7 / 551.9 / 548.9 -> 568.6 / 565.5 / 564.3 / 568.7 (+2.9%); with
  // Q5_K's q/k/v rows, 555.1 / 548.5 -> 569.9 / 561.5. The wider rows:
  // gemma2-9b 285.7 / 288.4 -> 291.2 / 289.3, gemma3-12b 237.3 / 238.8 ->
  // 240.9 / 240.4, qwen2.5-7b 400.8 / 398.4 -> 402.6 / 402.6.
  bool kq_stream_uneven_one_row = true;
  // One activation row's q/k/v of two formats (q4_k_m keeps V in Q6_K in
  // half the layers) in one streaming-GEMV launch, each block in its
  // segment's format, where each format's run took a launch. Measured on
  // the H100 (tg128 b1 after 64 prompt tokens, two rounds, off -> on):
  // llama3-8b q4_k_m 374.3 / 374.3 -> 382.2 / 381.5 tok/s, qwen3-30b-a3b
  // q4_k_m 380.1 / 379.6 -> 387.1 / 387.8.
  bool gemv_two_formats = true;
  // FP8 weights (F8_E4M3_ROW): batches of at least this many rows (and
  // more than the GEMV's 8) quantize their activations to e4m3 (a scale per
  // row) and multiply on FP8 tensor cores (cuBLASLt, outer-vector scales),
  // as vLLM's FP8 does; at 0, or where cuBLASLt has no such GEMM, they keep
  // f16 activations (the f16 tensor-core matmul up to 256 rows, dequantize
  // + BLAS past it). Measured on the H200 (llama3-8b fp8, 9 against 0):
  // pp512 19.7k -> 33.8k tok/s, 64 x pp512 33.1k -> 43.4k, 64-sequence
  // decode 4,975 -> 5,447; KL divergence against f16 0.0115 -> 0.0165.
  int fp8_gemm_min_rows = 9;
  // Prefill attention of head sizes 64, 96, 128 and 256 on tensor cores (mma.m16n8k16,
  // prefill_mma_tile.h) instead of the CUDA-core kernel. Measured on the
  // H200 (llama3-8b f16): pp512 22.2k -> 31.8k tok/s, 64 x pp512 28.3k ->
  // 35.9k, pp4096 9.9k -> 26.5k.
  bool prefill_mma = true;
  // ... with prefill query tiles deep in their context split over their keys
  // into at most this many parts a step (query_tiles.h: when a step's tiles
  // fit the GPU at once, so that the longest no longer sets the kernel's
  // time); their partial results take this many slots of scratch. 0: never.
  int prefill_tile_partials = 64;
  // A layer's q, k and v weights of one format loaded into one allocation
  // (Backend::packs_qkv); batches of 9..kPackedQkvMaxRows rows then take one
  // matmul into scratch and one kernel splitting it into q, k and v with
  // their biases, instead of three matmuls.
  bool packed_qkv = true;
  // ... and gate and up weights, which batches of 9..kPackedQkvMaxRows rows
  // then multiply in one matmul (into scratch) followed by the GLU of its
  // two halves, instead of two matmuls and the GLU. Measured on the H100
  // (llama3-8b, 64 x (512 + 128), decode tok/s, two rounds, off -> on):
  // q4_k_m 6,559 / 6,516 -> 6,709 / 6,675; f16 7,584 / 7,388 -> 7,547 /
  // 7,571 (within the noise).
  bool packed_gate_up = true;
  // RMSNorm gains folded into the f16 weights of the matmuls after them at
  // load (Backend::fold_norm_gain), so that one token's residual add and
  // norm ride in the f16 GEMVs around them (matmul_add_rms_norm: the o /
  // down projection adds its rows to the residual, the q/k/v and gate*up
  // GEMVs scale by 1 / rms of the row they read): two launches fewer a
  // layer at batch 1.
  bool fold_norm_gains = true;
  // Per-op GPU times (op_profiler.h); CUDA graphs are off while profiling.
  bool profile = false;

  // The defaults, or `base`, with the environment switches above applied.
  static CudaOptions from_env();
  static CudaOptions from_env(CudaOptions base);
};

}  // namespace rf
