// The matrix-core path of the tiled f16 GEMM (gemm_tiled.cu) on CDNA GPUs
// (gfx908, gfx90a, gfx94x: 64-wide wavefronts with MFMA), written once
// against a lane interface so that the CPU test
// (tests/op/cpu_mfma_emulation_test.cpp) runs this same code on emulated
// wavefronts. A block of 256 threads (four wavefronts) computes a 64 x 64
// tile of out[n, m] = x[n, k] . w[m, k]^T; each wavefront a 32 x 32 quarter
// of it as 2 x 2 products of 16 x 16, stepping k by 16 through shared
// memory.
//
// The one instruction used, V_MFMA_F32_16X16X16F16 (D += A . B, A 16 x 16,
// B 16 x 16, f16 in, f32 out), distributes its operands over the 64 lanes
// as AMD's ISA documents: lane l holds A[l % 16][4 (l / 16) + e] and
// B[4 (l / 16) + e][l % 16] for e = 0..3, and gets D[4 (l / 16) + e][l % 16].
// Lanes::mma16(d, a, b) performs it (gpu.h: the builtin; the test: a
// gather over the emulated lanes). No vendor headers: plain C++ too.
#pragma once

#include "backend/cuda/wave.h"

namespace rf::gpu::mfma {

constexpr int kTile = 64, kStepK = 16, kThreads = 256, kWave = 64;

// xs, ws: shared memory of kTile * kStepK floats each. load_x(r, c) and
// load_w(r, c) read x[r, c] and w[r, c] (in range); store(r, c, v) writes
// out[r, c]. Every thread of the block calls it.
template <typename Lanes, typename LoadX, typename LoadW, typename Store>
RF_WAVE_FN void gemm_tile(float* xs, float* ws, int n0, int m0, int n, int m, int k, LoadX load_x, LoadW load_w,
                          Store store, Lanes& lanes) {
  const int lane = lanes.lane(), wave = lanes.warp();
  const int tid = wave * kWave + lane;
  const int wr = (wave / 2) * 32, wc = (wave % 2) * 32;  // this wavefront's quarter
  const int li = lane % 16, lk = (lane / 16) * 4;
  float acc[2][2][4] = {};
  for (int k0 = 0; k0 < k; k0 += kStepK) {
    for (int i = tid; i < kTile * kStepK; i += kThreads) {
      const int r = i / kStepK, c = i % kStepK;
      xs[i] = (n0 + r < n && k0 + c < k) ? load_x(n0 + r, k0 + c) : 0.0f;
      ws[i] = (m0 + r < m && k0 + c < k) ? load_w(m0 + r, k0 + c) : 0.0f;
    }
    lanes.sync_block();
RF_WAVE_UNROLL
    for (int ti = 0; ti < 2; ++ti) {
      float a[4];
RF_WAVE_UNROLL
      for (int e = 0; e < 4; ++e) a[e] = xs[(wr + ti * 16 + li) * kStepK + lk + e];
RF_WAVE_UNROLL
      for (int tj = 0; tj < 2; ++tj) {
        float b[4];
RF_WAVE_UNROLL
        for (int e = 0; e < 4; ++e) b[e] = ws[(wc + tj * 16 + li) * kStepK + lk + e];
        lanes.mma16(acc[ti][tj], a, b);
      }
    }
    lanes.sync_block();
  }
RF_WAVE_UNROLL
  for (int ti = 0; ti < 2; ++ti)
RF_WAVE_UNROLL
    for (int tj = 0; tj < 2; ++tj)
RF_WAVE_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int r = n0 + wr + ti * 16 + lk + e, c = m0 + wc + tj * 16 + li;
        if (r < n && c < m) store(r, c, acc[ti][tj][e]);
      }
}

}  // namespace rf::gpu::mfma
