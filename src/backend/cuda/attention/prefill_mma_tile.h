// Prefill attention on NVIDIA tensor cores: one block's tile of query rows
// (tokens x query heads of one KV head) against the paged keys, causal, with
// an optional sliding window and logit soft-cap, in the way of
// FlashAttention-2: K/V tiles of kKeys<HD> keys staged in shared memory as f16,
// the next tile's copies in flight while one is used (two stages), S = Q K^T
// and O += P V by mma.m16n8k16 (f16 in, f32 accumulation), an online
// softmax per row in registers. Each warp owns 16 rows.
//
// Written once against two interfaces, so that the CPU test
// (tests/op/cpu_prefill_mma_emulation_test.cpp) runs this same code on
// emulated 32-lane warps whose mma follows PTX's documented fragment layout
// (attention_prefill.cu instantiates it on the device):
//  - Lanes: lane(), warp(), n_warps(), sync_block(), shfl_xor(float, mask),
//    mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t
//    b1) — c += A . B with A 16 x 16 and B 16 x 8 in mma.m16n8k16's .row /
//    .col f16 fragments — ldsm_x4(r, row) and ldsm_x4_trans(r, row) (PTX
//    ldmatrix .x4 of f16 from shared memory: lanes 8 j .. 8 j + 7 give the
//    16-byte rows of 8 x 8 matrix j; lane i gets r[j] = its row i / 4,
//    columns 2 (i % 4) + {0, 1}, or with _trans its rows 2 (i % 4) + {0, 1},
//    column i / 4), pack2(lo, hi): two floats as f16x2 bits (round to
//    nearest even, lo in the low half), and copy_commit() / copy_wait(n)
//    for staging copies that may be asynchronous (cp.async groups: wait
//    until at most n of this thread's groups are in flight, n 0 or 1);
//  - Env, the tile's data: rows() (<= 16 warps), pos(r) (the query position
//    of row r, -1 for padding), sink(r) (row r's head's sink logit, -inf for
//    none: softmax_sink.h, folded in at the end of a whole tile), row(r) (row r resolved once: q_pair(d, v0,
//    v1) gives its query's dims d, d + 1, scaled; store(d, v0, v1) takes
//    output dims d, d + 1; when partial() (this block is one key part of a
//    split tile) store_partial(d, v0, v1) takes the unnormalized sums and
//    store_stats(m, l) the row's running max and sum instead of store),
//    key_row(p) (where key p's K and V rows are, resolved once: an int64_t
//    handle), stage(key_row, c, k8, v8) (dims [8 c, 8 c + 8) of that key's
//    K and V rows as f16 bits, possibly asynchronously: they land by the
//    next copy_wait), and the fields k_lo (the
//    first key any row sees), max_pos (the last), window (> 0: a row at pos
//    sees keys pos - window < j <= pos) and softcap (> 0: scores become
//    softcap tanh(s / softcap)). A part's keys are [k_lo, max_pos], k_lo a
//    multiple of kKeys<HD> unless a window starts later.
// Fragment layouts (PTX ISA, mma.m16n8k16 with .f16 inputs), g = lane / 4,
// t = lane % 4: A a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same), a2 =
// (row g, cols 2t+8, 2t+9), a3 = (row g+8, same); B b0 = (rows 2t, 2t+1,
// col g), b1 = (rows 2t+8, 2t+9, col g); C c0, c1 = (row g, cols 2t, 2t+1),
// c2, c3 = (row g+8, same). The S tile's C fragments are the A fragments
// of P for P V without any exchange.
#pragma once

#include <cstdint>

#include "backend/cuda/attention/softmax_sink.h"
#include "backend/cuda/wave.h"

namespace rf::gpu::prefill_mma {

constexpr int kWarpRows = 16;    // query rows per warp
constexpr int kMaxWarps = 8;

// Keys per staged K/V tile: 64, or 32 at head size 256 (its accumulators
// take the registers).
template <int HD>
constexpr int kKeys = HD > 128 ? 32 : 64;

template <int HD>
constexpr int kRowHalves = HD + 8;  // a staged key row (16 bytes of pad: conflict-free B loads)

template <int HD>
constexpr int kStageHalves = kKeys<HD> * kRowHalves<HD>;  // one of the K and V tiles

// Staged rows are 16-byte aligned for ldmatrix (every head size here).
static_assert(kRowHalves<64> % 8 == 0 && kRowHalves<96> % 8 == 0 && kRowHalves<128> % 8 == 0 &&
                  kRowHalves<256> % 8 == 0,
              "staged K/V rows: whole 16-byte units");

// Registers a thread may use (the kernel's bound; kMaxWarps warps a block
// must fit an SM): at head sizes up to 128, 168 lets three 4-warp blocks
// share an SM (65,536 registers) where the unbounded 179 held two.
template <int HD>
constexpr int kMaxRegisters = HD > 128 ? 255 : 168;

// Shared memory of a block: two stages (double buffering) of K and V tiles.
template <int HD>
constexpr int kSmemBytes = 2 * 2 * kStageHalves<HD> * 2;

RF_WAVE_FN float exp_(float v) {
#if defined(__CUDACC__) || defined(__HIPCC__)
  return __expf(v);
#else
  return std::exp(v);
#endif
}

// 2^v; on NVIDIA one ex2.approx (subnormal results flushed to zero).
RF_WAVE_FN float exp2_(float v) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
#elif defined(__HIPCC__)
  return exp2f(v);
#else
  return std::exp2(v);
#endif
}

RF_WAVE_FN float tanh_(float v) {
#if defined(__CUDACC__) || defined(__HIPCC__)
  return tanhf(v);
#else
  return std::tanh(v);
#endif
}

// smem: kSmemBytes<HD> bytes (16-byte aligned). Every thread of the block
// (32 * n_warps threads, rows() <= 16 n_warps) calls it.
template <int HD, typename Env, typename Lanes>
RF_WAVE_FN void attend(Env& e, uint16_t* smem, Lanes& x) {
  static_assert(HD % 16 == 0, "head size: a multiple of 16");
  constexpr int kRow = kRowHalves<HD>, kSteps = HD / 16, kDimBlocks = HD / 8, kChunks = HD / 8, kK = kKeys<HD>;
  const int lane = x.lane(), w = x.warp(), g = lane / 4, t = lane % 4;
  const int threads = x.n_warps() * 32, tid = w * 32 + lane;
  const int n_rows = e.rows();
  const int rows[2] = {w * kWarpRows + g, w * kWarpRows + g + 8};
  int pos[2];
RF_WAVE_UNROLL
  for (int i = 0; i < 2; ++i) pos[i] = rows[i] < n_rows ? e.pos(rows[i]) : -1;

  // This warp's queries as A fragments, HD / 16 steps of 16 dims (padding
  // rows: zeros).
  uint32_t qa[kSteps][4];
  {
    using Row = decltype(e.row(0));
    const Row q0 = pos[0] >= 0 ? e.row(rows[0]) : Row{}, q1 = pos[1] >= 0 ? e.row(rows[1]) : Row{};
    auto pair = [&](const Row& q, int i, int d) {
      float v0 = 0.0f, v1 = 0.0f;
      if (pos[i] >= 0) q.q_pair(d, v0, v1);
      return x.pack2(v0, v1);
    };
RF_WAVE_UNROLL
    for (int s = 0; s < kSteps; ++s) {
      const int d = 16 * s + 2 * t;
      qa[s][0] = pair(q0, 0, d);
      qa[s][1] = pair(q1, 1, d);
      qa[s][2] = pair(q0, 0, d + 8);
      qa[s][3] = pair(q1, 1, d + 8);
    }
  }
  float o[kDimBlocks][4];
RF_WAVE_UNROLL
  for (int d = 0; d < kDimBlocks; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  // Stage b of the K and V tiles: K at smem + 2 b kStageHalves, V after it.
  auto stage_k = [&](int b) { return smem + 2 * b * kStageHalves<HD>; };
  // This thread's copies: chunks c0, c0 + 4, ... of staged rows j_first,
  // j_first + j_step, ... (four lanes a row: a warp's copy instruction
  // covers 64 contiguous bytes of each of 8 rows), each row looked up once,
  // kBatch of them before any copy (the lookups' loads in flight together).
  constexpr int kLanesPerRow = 4, kChunksPerLane = kChunks / kLanesPerRow, kBatch = 2;
  static_assert(kChunks % kLanesPerRow == 0, "a staged row: whole chunks per lane");
  const int c0 = tid % kLanesPerRow, j_first = tid / kLanesPerRow, j_step = threads / kLanesPerRow;
  auto issue = [&](int k0, int b) {  // this thread's copies of the tile at k0 into stage b
    uint16_t* ks = stage_k(b);
    uint16_t* vs = ks + kStageHalves<HD>;
    for (int j0 = j_first; j0 < kK; j0 += kBatch * j_step) {
      int64_t key_rows[kBatch];
RF_WAVE_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const int j = j0 + u * j_step, p = k0 + j;
        key_rows[u] = j < kK && p >= e.k_lo && p <= e.max_pos ? e.key_row(p) : int64_t(-1);
      }
RF_WAVE_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const int j = j0 + u * j_step;
        if (j >= kK) continue;
RF_WAVE_UNROLL
        for (int i = 0; i < kChunksPerLane; ++i) {
          const int c = c0 + kLanesPerRow * i;
          uint16_t* kd = ks + j * kRow + 8 * c;
          uint16_t* vd = vs + j * kRow + 8 * c;
          if (key_rows[u] >= 0) {
            e.stage(key_rows[u], c, kd, vd);
          } else {
RF_WAVE_UNROLL
            for (int h = 0; h < 8; ++h) kd[h] = vd[h] = 0;
          }
        }
      }
    }
    x.copy_commit();
  };
  const int k_first = e.k_lo / kK * kK;
  if (k_first <= e.max_pos) issue(k_first, 0);
  int b = 0;
  for (int k0 = k_first; k0 <= e.max_pos; k0 += kK, b ^= 1) {
    // The next tile's copies go out before this one is used (its stage was
    // released by the barrier ending the previous iteration).
    const bool more = k0 + kK <= e.max_pos;
    if (more) {
      issue(k0 + kK, b ^ 1);
      x.copy_wait(1);
    } else {
      x.copy_wait(0);
    }
    x.sync_block();  // every thread's copies of this tile have landed
    const uint16_t* ks = stage_k(b);
    const uint16_t* vs = ks + kStageHalves<HD>;

    // S = Q K^T for the tile's blocks of 8 keys. One ldmatrix gives the B
    // fragments of two 16-dim steps: matrix j holds the block's keys at
    // dims 16 st + 8 j .. + 7 (lane i addresses key i % 8, j = i / 8).
    float s[kK / 8][4];
RF_WAVE_UNROLL
    for (int nb = 0; nb < kK / 8; ++nb) {
      s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
      const uint16_t* kr = ks + (nb * 8 + lane % 8) * kRow + 8 * (lane / 8);
RF_WAVE_UNROLL
      for (int st = 0; st < kSteps; st += 2) {
        uint32_t kb[4];
        x.ldsm_x4(kb, kr + 16 * st);
        x.mma16816(s[nb], qa[st], kb[0], kb[1]);
        x.mma16816(s[nb], qa[st + 1], kb[2], kb[3]);
      }
    }
    // Visibility, soft-cap, and the tile's maximum of each of the thread's
    // two rows. A tile whose keys both rows see whole (before their
    // positions, inside their windows) and no soft-cap: the scores as they
    // are (most key tiles of a long prompt).
    float tile_max[2] = {-INFINITY, -INFINITY};
    const int pos_lo = pos[0] < pos[1] ? pos[0] : pos[1], pos_hi = pos[0] < pos[1] ? pos[1] : pos[0];
    const bool whole = e.softcap <= 0.0f && k0 + kK - 1 <= pos_lo && (e.window <= 0 || k0 > pos_hi - e.window);
    if (whole) {
RF_WAVE_UNROLL
      for (int nb = 0; nb < kK / 8; ++nb) {
        tile_max[0] = fmaxf(tile_max[0], fmaxf(s[nb][0], s[nb][1]));
        tile_max[1] = fmaxf(tile_max[1], fmaxf(s[nb][2], s[nb][3]));
      }
    } else {
RF_WAVE_UNROLL
      for (int nb = 0; nb < kK / 8; ++nb)
RF_WAVE_UNROLL
        for (int c = 0; c < 4; ++c) {
          const int i = c / 2, key = k0 + nb * 8 + 2 * t + c % 2;
          const bool visible = pos[i] >= 0 && key <= pos[i] && (e.window <= 0 || key > pos[i] - e.window);
          float v = s[nb][c];
          if (e.softcap > 0.0f) v = e.softcap * tanh_(v / e.softcap);
          s[nb][c] = visible ? v : -INFINITY;
          tile_max[i] = fmaxf(tile_max[i], s[nb][c]);
        }
    }
    float corr[2];
RF_WAVE_UNROLL
    for (int i = 0; i < 2; ++i) {
      tile_max[i] = fmaxf(tile_max[i], x.shfl_xor(tile_max[i], 1));
      tile_max[i] = fmaxf(tile_max[i], x.shfl_xor(tile_max[i], 2));  // the 4 lanes of the row
      const float m_new = fmaxf(m[i], tile_max[i]);
      corr[i] = m_new == -INFINITY ? 1.0f : exp_(m[i] - m_new);
      m[i] = m_new;
      l[i] *= corr[i];
    }
    // p = e^(s - m) = 2^(s log2 e - m log2 e): a multiply-add and an exp2
    // per score; masked scores (-inf, only outside whole tiles) weigh 0.
    constexpr float kLog2e = 1.4426950408889634f;
    // A row that has seen no visible key yet (m -inf) subtracts 0, so its
    // masked scores too give 2^-inf = 0 rather than NaN.
    const float mb[2] = {m[0] == -INFINITY ? 0.0f : m[0] * kLog2e, m[1] == -INFINITY ? 0.0f : m[1] * kLog2e};
RF_WAVE_UNROLL
    for (int nb = 0; nb < kK / 8; ++nb)
RF_WAVE_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int i = c / 2;
        const float p = exp2_(fmaf(s[nb][c], kLog2e, -mb[i]));
        s[nb][c] = p;
        l[i] += p;
      }
    // The accumulators rescaled only where a row's maximum moved (in a long
    // prompt it seldom does after the first key tiles).
    if (corr[0] != 1.0f || corr[1] != 1.0f) {
RF_WAVE_UNROLL
      for (int d = 0; d < kDimBlocks; ++d) {
        o[d][0] *= corr[0];
        o[d][1] *= corr[0];
        o[d][2] *= corr[1];
        o[d][3] *= corr[1];
      }
    }
    // O += P V, 16 keys per step.
RF_WAVE_UNROLL
    for (int kk = 0; kk < kK / 16; ++kk) {
      const uint32_t pa[4] = {x.pack2(s[2 * kk][0], s[2 * kk][1]), x.pack2(s[2 * kk][2], s[2 * kk][3]),
                              x.pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), x.pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      // One transposed ldmatrix gives the B fragments of two 8-dim blocks:
      // matrix j holds keys kk 16 + 8 (j % 2) .. + 7 at dims 8 (d + j / 2)
      // .. + 7 (lane i addresses key 8 ((i / 8) % 2) + i % 8).
      const uint16_t* vr = vs + (kk * 16 + 8 * ((lane / 8) % 2) + lane % 8) * kRow + 8 * (lane / 16);
RF_WAVE_UNROLL
      for (int d = 0; d < kDimBlocks; d += 2) {
        uint32_t vb[4];
        x.ldsm_x4_trans(vb, vr + 8 * d);
        x.mma16816(o[d], pa, vb[0], vb[1]);
        x.mma16816(o[d + 1], pa, vb[2], vb[3]);
      }
    }
    x.sync_block();  // this stage is read: the next iteration may refill it
  }
  // Each row's sum over its 4 lanes; rows that saw no key (padding tokens
  // at position -1, as decode graphs pad their batches) output 0. A part of
  // a split tile leaves its unnormalized sums and (max, sum) instead (max
  // -inf and sum 0 where the row saw none of the part's keys).
RF_WAVE_UNROLL
  for (int i = 0; i < 2; ++i) {
    l[i] += x.shfl_xor(l[i], 1);
    l[i] += x.shfl_xor(l[i], 2);
    if (rows[i] >= n_rows) continue;
    const auto out = e.row(rows[i]);
    if (e.partial()) {
      if (t == 0) out.store_stats(m[i], l[i]);
RF_WAVE_UNROLL
      for (int d = 0; d < kDimBlocks; ++d) out.store_partial(8 * d + 2 * t, o[d][2 * i], o[d][2 * i + 1]);
      continue;
    }
    const float inv = pos[i] >= 0 ? softmax_out_scale(m[i], l[i], e.sink(rows[i])) : 0.0f;
RF_WAVE_UNROLL
    for (int d = 0; d < kDimBlocks; ++d) out.store(8 * d + 2 * t, o[d][2 * i] * inv, o[d][2 * i + 1] * inv);
  }
}

}  // namespace rf::gpu::prefill_mma
